# Sourced by scripts/test: Debian's PgBouncer, for tests/test_pgbouncer.py (the shop behind
# a transaction pooler), installed as root when missing. Quick when there.
# The tests start their own PgBouncer on 127.0.0.1 as an unprivileged user; the one
# apt-get would start is stopped. Without it those tests are skipped, saying how to get it.
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing pgbouncer for the connection-pooler tests (apt-get)..." >&2
    if { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }; then
      { systemctl disable --now pgbouncer || service pgbouncer stop; } >/dev/null 2>&1 || true
    else
      echo "warning: could not install pgbouncer; tests/test_pgbouncer.py will be skipped." >&2
    fi
  else
    echo "warning: no pgbouncer and not root: run 'apt-get install pgbouncer' as root," \
         "or tests/test_pgbouncer.py will be skipped." >&2
  fi
fi
