"""gunicorn settings for production::

    gunicorn -c python:webapp.gunicorn_conf 'webapp:create_app()'

Every value can still be overridden on the command line or with GUNICORN_CMD_ARGS.
What it adds to gunicorn's defaults is explained in docs/DEPLOY.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gunicorn.glogging import Logger

# Loopback: production runs behind a buffering reverse proxy on the same machine
# (docs/nginx.conf). Reachable from elsewhere, gunicorn's gthread workers are held by
# slow clients, and with TRUSTED_PROXIES set a client could choose its own address.
bind = os.environ.get("BIND", "127.0.0.1:8000")
# Threads: requests mostly wait on Redis and PostgreSQL, and a duplicate waits for the first
# submit in its thread, holding no database connection meanwhile.
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1)))
threads = int(os.environ.get("WEB_THREADS", 8))
worker_class = "gthread"
# Longer than SUBMIT_ONCE_WAIT_SECONDS (10 s by default): a duplicate waiting for the first
# submit must not be killed as a hung worker. A worker killed mid-submit leaves no half
# order (one transaction), so the grace period only spares the customer a retry.
timeout = 30
graceful_timeout = 20
# below a proxy's idle timeout for connections it keeps open to the app
keepalive = 5
# the app writes one JSON line per request itself (webapp/request_log.py)
accesslog = None
# Trust no forwarded header here: gunicorn would take X-Forwarded-Proto/-Ssl/-Protocol
# from loopback (or any Unix socket) as HTTPS whatever TRUSTED_PROXIES says. The scheme
# and the client address come only from ProxyFix, as many hops as TRUSTED_PROXIES names.
forwarded_allow_ips = ""
secure_scheme_headers: dict[str, str] = {}
# gunicorn 25.1+ opens a control socket at one path per user (~/.gunicorn/gunicorn.ctl):
# a second instance takes it over and stopping either deletes it under the other. Off,
# unless GUNICORN_CONTROL_SOCKET names this instance's own path. (Older gunicorn
# ignores both settings.)
control_socket_disable = not os.environ.get("GUNICORN_CONTROL_SOCKET")
if os.environ.get("GUNICORN_CONTROL_SOCKET"):
    control_socket = os.environ["GUNICORN_CONTROL_SOCKET"]
# gunicorn's own lines (start, workers booted and killed) as JSON lines like the app's
# (webapp/logs.py), on stderr, without a client's address or what it sent; no access
# log: the app writes its own request line.
logconfig_dict = {
    "root": {"level": "WARNING", "handlers": ["json"]},
    "filters": {"no_client_details": {"()": "webapp.logs.NoClientDetails"}},
    "loggers": {
        "gunicorn.error": {
            "level": "INFO",
            "handlers": [],
            "propagate": True,
            "filters": ["no_client_details"],
        },
        "gunicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False},
    },
    "handlers": {
        "json": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stderr",
        }
    },
    "formatters": {"json": {"()": "webapp.logs.JsonLines"}},
}


class NoAccessLog(Logger):
    """gunicorn's logger without its access line. With a logging config (the one above)
    gunicorn counts its access log as on and, for every request, builds the line's fields
    (every environ variable and header, about 60 us) for a logger that then drops it."""

    @property
    def access_log_enabled(self) -> bool:
        return False

    def access(self, resp, req, environ, request_time) -> None:
        return None


logger_class = NoAccessLog


#: The files prometheus-client writes in PROMETHEUS_MULTIPROC_DIR: <type>_<pid>.db,
#: gauges with their mode (gauge_livesum_<pid>.db).
SAMPLE_FILE = re.compile(r"(counter|histogram|summary|gauge_[a-z]+)_[0-9]+\.db")


def on_starting(server) -> None:
    """Stop when DATABASE_URL leads through a pooler DATABASE_POOLER does not name (the
    message names it; gunicorn exits printing it). Delete a previous run's samples from
    the Prometheus multi-process directory (they would count), and nothing else there: the
    setting may name a folder that holds other things."""
    from webapp.config import check_pooler
    from webapp.db import refuse_unnamed_pooler

    if os.environ.get("DATABASE_URL"):
        pooler = check_pooler(os.environ.get("DATABASE_POOLER", ""))
        refuse_unnamed_pooler(os.environ["DATABASE_URL"], pooler)
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for path in Path(directory).iterdir():
            if SAMPLE_FILE.fullmatch(path.name) and path.is_file():
                path.unlink(missing_ok=True)


def child_exit(server, worker) -> None:
    """Drop a dead worker's live gauges (counters and histograms are kept, as they should)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
