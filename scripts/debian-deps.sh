# Sourced by scripts/test: the Debian servers some tests run, installed as root when
# missing (quick when there). Each test starts its own on 127.0.0.1 as it needs it; the
# service apt-get starts is stopped. Without one, the tests that need it are skipped,
# saying how to get it.

# debian_server PACKAGE PROGRAM WHAT [SERVICE]: install PACKAGE unless PROGRAM (a name,
# or a path) is on the PATH or in /usr/sbin, for WHAT (the tests that need it); SERVICE
# (PACKAGE unless given) is the service apt-get starts, stopped and disabled.
debian_server() {
  local package=$1 program=$2 what=$3 service=${4:-$1}
  if command -v "$program" >/dev/null || [ -x "/usr/sbin/$program" ]; then
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "warning: no $program and not root: run 'apt-get install $package' as root," \
         "or $what will be skipped." >&2
    return 0
  fi
  echo "Installing $package for $what (apt-get)..." >&2
  if [ -z "${_debian_updated:-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && _debian_updated=1
  fi
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; then
    { systemctl disable --now "$service" || service "$service" stop; } >/dev/null 2>&1 || true
  else
    echo "warning: could not install $package; $what will be skipped." >&2
  fi
}

debian_server nginx nginx "tests/deploy/test_behind_nginx.py (the app behind docs/nginx.conf)"
debian_server pgbouncer pgbouncer "tests/deploy/test_pgbouncer.py (the shop behind a transaction pooler)"
debian_server redis-server redis-server "the library's Redis 7 session (nox -s servers)"
debian_server mariadb-server mariadbd "the library's MariaDB tests (flask-submit-once/tests/test_mariadb.py)" mariadb
debian_server postgresql-15 /usr/lib/postgresql/15/bin/pg_ctl "the library's PostgreSQL 15 run (nox -s servers)" postgresql
