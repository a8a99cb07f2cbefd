"""The checkout app in a process of its own, for the tests that kill it::

    python serve_checkout.py PORT REDIS_URL DATABASE_URL POINT [LEASE_SECONDS]

Werkzeug's threaded server serves it on 127.0.0.1:PORT and says ``serving`` on stdout
once it listens. A submit stops for ever at POINT, and says so on stdout first:
``committed <pid>`` once its order is committed, before the step (``submit_committed``);
``charging <key>`` inside the step, holding the order's lease (renewed while the process
lives; ``SUBMIT_ONCE_STEP_LEASE_SECONDS``: LEASE_SECONDS), as the provider is called.
The test kills the process there.
"""

from __future__ import annotations

import os
import sys
import threading

from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
from werkzeug.serving import make_server

from checkout_app import Provider, create_app
from flask_submit_once import signals
from live import QuietHandler


def stop_here(said: str) -> None:
    print(said, flush=True)
    threading.Event().wait()


class HangingProvider(Provider):
    def charge(self, key: str, cents: int) -> str:
        stop_here(f"charging {key}")
        raise AssertionError("unreachable")


def main(port: int, redis_url: str, database_url: str, point: str, lease: float) -> None:
    app = create_app(
        sessionmaker(create_engine(database_url)),
        HangingProvider(),
        REDIS_URL=redis_url,
        SUBMIT_ONCE_STEP_LEASE_SECONDS=lease,
    )
    if point == "committed":
        signals.submit_committed.connect(
            lambda sender, **extra: stop_here(f"committed {os.getpid()}"), sender=app, weak=False
        )
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    print("serving", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    lease = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], lease)
