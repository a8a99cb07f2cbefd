"""The request's session when its PostgreSQL connection dies under it (a failover, a
restart): the request ends with the answer it made, never a 500 from the extension's
own clean-up."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from sqlalchemy import Engine, text

from signup_app import submit_once


def test_a_connection_that_died_during_the_request_is_thrown_away_not_a_500(
        make_app: Callable[..., Flask], engine: Engine) -> None:
    """Before: closing the session at teardown rolled back on the dead connection and
    raised (AdminShutdown), so a page already made was a 500 from gunicorn."""
    app = make_app()

    @app.get("/whoami")
    def whoami() -> str:
        db = submit_once.session  # the request's session: a transaction is open on it
        pid = db.scalar(text("SELECT pg_backend_pid()"))
        with engine.connect() as other:  # the server ends that connection, as a crash would
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        return str(pid)

    client = app.test_client()
    answer = client.get("/whoami")
    assert answer.status_code == 200 and answer.text.isdigit()
    assert client.get("/whoami").status_code == 200  # the pool gave a live connection
