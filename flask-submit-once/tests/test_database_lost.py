"""PostgreSQL lost during a request (a failover, a restart): the request ends with the
answer it made, never a 500 from the extension's own clean-up; and PostgreSQL away while a
form is validated is the outage's answer (503, the input, the same token)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

import signup_app
from flask_submit_once import Outcome, signals
from flask_submit_once.testing import OnceForms
from servers import end_connection, free_port
from signup_app import submit_once


def test_a_connection_that_died_during_the_request_is_thrown_away_not_a_500(
    make_app: Callable[..., Flask], engine: Engine
) -> None:
    """Before: closing the session at teardown rolled back on the dead connection and
    raised (AdminShutdown), so a page already made was a 500 from gunicorn."""
    app = make_app()

    @app.get("/whoami")
    def whoami() -> str:
        # the request's session: a transaction is open on it
        db = submit_once.session
        pid = db.scalar(text("SELECT pg_backend_pid()"))
        # the server ends that connection, as a crash would
        with engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        return str(pid)

    client = app.test_client()
    answer = client.get("/whoami")
    assert answer.status_code == 200 and answer.text.isdigit()
    # the pool gave a live connection
    assert client.get("/whoami").status_code == 200


@pytest.fixture
def away_app(redis_url: str, rdb: object) -> Iterator[Flask]:
    """The sign-up app on a PostgreSQL that does not answer (nothing listens there)."""
    port = free_port()
    nowhere = create_engine(f"postgresql+psycopg://nobody:secret@127.0.0.1:{port}/db")
    app = signup_app.create_app(sessionmaker(nowhere), REDIS_URL=redis_url, DATABASE_PORT=port)
    yield app
    with app.app_context():
        submit_once.redis.close()
    nowhere.dispose()


@pytest.mark.parametrize(
    "sent",
    [
        # valid fields, but a validator reads the database
        {"email": "ada@example.com"},
        # invalid: whether this token already landed is asked
        {"email": "not an address"},
    ],
    ids=["a-validator-reads-it", "invalid-fields"],
)
def test_postgresql_away_while_the_form_is_validated_keeps_the_input_and_the_token(
    away_app: Flask, sent: dict[str, str]
) -> None:
    """Before: the database error raised out of the validation (a validator's query) or
    out of the repeat check of invalid fields (a repeat of a landed submit is answered
    as one), so the user got the app's bare error page with what they typed gone."""
    forms = OnceForms(away_app.test_client())
    page = forms.open("/signup")
    answer = page.submit({"name": "Ada", "quantity": "2", **sent})
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    assert f'value="{sent["email"]}"' in answer.text and 'value="Ada"' in answer.text
    # nothing was spent
    assert forms.page("/signup", answer.text).token == page.token


def test_a_repeat_whose_connection_dies_while_it_waits_for_the_first_keeps_the_input(
    make_app: Callable[..., Flask], engine: Engine
) -> None:
    """A repeat finds the first submit holding the lock and ends its attempt (ROLLBACK)
    to wait without a connection; the connection died meanwhile (a failover). Before: that
    ROLLBACK's error went out to the app (the failover soak's bare 503 page, the input
    gone). Nothing was spent: the outage's answer, with the input and the same token."""
    forms = OnceForms(make_app().test_client())
    page = forms.open("/signup")
    holder, held = engine.connect(), []

    def hold_the_lock(conn, cursor, statement, parameters, context, many) -> None:
        # the first submit has it
        if "pg_try_advisory_xact_lock" in statement and not held:
            holder.exec_driver_sql("SELECT pg_advisory_lock(%(key)s)", parameters)
            held.append(parameters["key"])

    def end_the_connection(conn, cursor, statement, parameters, context, many) -> None:
        if "pg_try_advisory_xact_lock" in statement and len(held) == 1:
            held.append(cursor.connection.info.backend_pid)
            end_connection(engine, held[1])

    event.listen(engine, "before_cursor_execute", hold_the_lock)
    event.listen(engine, "after_cursor_execute", end_the_connection)
    try:
        answer = page.submit({"email": "ada@example.com", "name": "Ada", "quantity": "2"})
    finally:
        event.remove(engine, "before_cursor_execute", hold_the_lock)
        event.remove(engine, "after_cursor_execute", end_the_connection)
        holder.exec_driver_sql("SELECT pg_advisory_unlock_all()")
        holder.close()
    assert len(held) == 2, "the submit never found the lock held"
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    assert 'value="ada@example.com"' in answer.text and 'value="Ada"' in answer.text
    again = forms.page("/signup", answer.text)
    # nothing was spent: the same token places it
    assert again.token == page.token
    assert again.submit({"email": "ada@example.com", "name": "Ada"}).status_code == 303


def test_postgresql_away_at_submit_is_logged_once_with_its_cause_and_no_secret(
    away_app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    """The database's own message, once, at WARNING: not its password (the URL's
    ``secret``), not what the form sent, not the token; and the outcome's receivers hear
    of it."""
    forms = OnceForms(away_app.test_client())
    page = forms.open("/signup")
    decided: list[Outcome] = []
    with (
        caplog.at_level(logging.WARNING, logger="flask_submit_once"),
        signals.submit_decided.connected_to(
            lambda sender, outcome, **extra: decided.append(outcome), sender=away_app
        ),
    ):
        answer = page.submit({"name": "Ada", "quantity": "2", "email": "ada@example.com"})
    assert answer.status_code == 503
    (outcome,) = decided
    assert outcome.kind == "unavailable" and isinstance(outcome.error, OperationalError)
    (said,) = [record for record in caplog.records if record.name == "flask_submit_once"]
    assert said.levelno == logging.WARNING
    assert "sign_up answered 503 (unavailable): OperationalError: " in said.getMessage()
    # The driver's own first line (psycopg 3.3 names the port; 3.1 says "Connection refused").
    cause = str(outcome.error.orig).splitlines()[0]
    assert cause.startswith("connection failed") and said.getMessage().endswith(cause)
    for never in ("secret", "ada@example.com", page.token, "SELECT"):
        assert never not in caplog.text
