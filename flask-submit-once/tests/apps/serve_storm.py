"""The storm app (its ``sessionmaker`` kind) in a process of its own, for the tests that
run several processes on one database, as several workers of a server do::

    python serve_storm.py PORT REDIS_URL DATABASE_URL

Werkzeug's threaded server serves it on 127.0.0.1:PORT and says ``serving`` on stdout
once it listens.
"""

from __future__ import annotations

import sys

from werkzeug.serving import make_server

import storm_app
from live import QuietHandler


def main(port: int, redis_url: str, database_url: str) -> None:
    pool = {"pool_size": 5, "max_overflow": 10, "pool_timeout": 30}
    app, _ = storm_app.create_app("sessionmaker", database_url, redis_url, pool)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    print("serving", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
