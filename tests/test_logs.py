"""Every log line of the app and of the refund worker is one JSON object with time,
level, logger and request id, that a log pipeline reads without a parser of its own."""

from __future__ import annotations

import json
import re
from datetime import datetime

from sqlalchemy import text

from tests.conftest import VALID, hidden
from tests.pauses import after_consume

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def json_lines(output: str) -> list[dict]:
    """Every non-empty line of ``output`` as JSON (a line that is not fails the test)."""
    lines = []
    for line in output.splitlines():
        if line.strip():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                raise AssertionError(f"not a JSON line: {line!r}") from None
    return lines


def assert_shape(line: dict) -> None:
    assert TIME.fullmatch(line["time"]) and datetime.fromisoformat(line["time"])
    assert line["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    assert line["logger"] and "request_id" in line and line["message"]


def test_a_views_warning_is_a_json_line_with_time_level_logger_and_the_request_id(
        make_app, servers, capfd):
    app = make_app()
    client = app.test_client()
    page = client.get("/orders/new").text
    form = {**VALID, "csrf_token": hidden(page, "csrf_token"),
            "form_token": hidden(page, "form_token")}

    def connection_lost():  # the submit's own transaction is killed under it
        with servers.engine.begin() as conn:
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()"))

    after_consume(app, connection_lost)
    try:
        capfd.readouterr()
        response = client.post("/orders", data=form, headers={"X-Request-ID": "lb-req-0042"})
    finally:
        after_consume(app, None)
    assert response.status_code == 503
    lines = json_lines(capfd.readouterr().err)
    for line in lines:
        assert_shape(line)
    (warning,) = [line for line in lines if line["logger"] == "webapp.orders.views"]
    assert warning["level"] == "WARNING"
    assert warning["message"] == "order not placed or not confirmed: connection lost"
    assert warning["request_id"] == "lb-req-0042" == response.headers["X-Request-ID"]
    (request_line,) = [line for line in lines if line["logger"] == "webapp.requests"]
    assert request_line["request_id"] == "lb-req-0042" and request_line["status"] == 503
    everything = json.dumps(lines)
    assert form["form_token"] not in everything and form["csrf_token"] not in everything
    assert VALID["email"] not in everything and "test-secret" not in everything
