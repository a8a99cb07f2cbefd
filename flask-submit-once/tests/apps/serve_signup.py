"""The suite's sign-up app in a process of its own, for the tests that kill it::

    python serve_signup.py PORT REDIS_URL DATABASE_URL

Werkzeug's threaded server serves it on 127.0.0.1:PORT and says ``serving`` on stdout
once it listens. Every submit that takes its token (``token_consumed``: inside its
transaction, holding the lock) says ``consumed <pid>`` and waits there for ever: the
test kills the process at that point.
"""

from __future__ import annotations

import os
import sys
import threading

from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
from werkzeug.serving import make_server

from flask_submit_once import signals
from live import QuietHandler
from signup_app import create_app


def hold_forever(sender: object, **extra: object) -> None:
    print(f"consumed {os.getpid()}", flush=True)
    threading.Event().wait()


def main(port: int, redis_url: str, database_url: str) -> None:
    app = create_app(sessionmaker(create_engine(database_url)), REDIS_URL=redis_url)
    signals.token_consumed.connect(hold_forever, sender=app)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    print("serving", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
