# Sourced by scripts/test: Debian's nginx, for tests/test_behind_nginx.py (the app behind
# docs/nginx.conf, with slow clients), installed as root when missing. Quick when there.
# The test starts its own nginx on 127.0.0.1; the one apt-get would start is stopped.
# Without nginx those tests are skipped, saying how to get it.
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing nginx for the reverse-proxy tests (apt-get)..." >&2
    if { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; }; then
      { systemctl disable --now nginx || service nginx stop; } >/dev/null 2>&1 || true
    else
      echo "warning: could not install nginx; tests/test_behind_nginx.py will be skipped." >&2
    fi
  else
    echo "warning: no nginx and not root: run 'apt-get install nginx' as root," \
         "or tests/test_behind_nginx.py will be skipped." >&2
  fi
fi
