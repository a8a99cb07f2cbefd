"""Every log line of the app and of the refund worker is one JSON object with time,
level, logger and request id, that a log pipeline reads without a parser of its own."""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
from datetime import datetime

from sqlalchemy import text

from tests.conftest import VALID, hidden
from tests.support.live import LiveServer
from tests.support.pauses import after_consume
from webapp.logs import JsonLines, NoClientDetails

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
    make_app, servers, capfd
):
    app = make_app()
    client = app.test_client()
    page = client.get("/orders/new").text
    form = {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }

    # the submit's own transaction is killed under it
    def connection_lost():
        with servers.engine.begin() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()"
                )
            )

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


#: Request lines gunicorn refuses (each was logged with the client's address and up to
#: ~4 KB of what it sent). Each holds "attacker" where gunicorn would echo it.
MALFORMED = [
    # no method, no version: 4,000 bytes
    b"<script>attacker</script>" * 160,
    # a method of control characters
    b"G\x01T /orders/attacker HTTP/1.1",
    # no such version
    b"GET /orders/attacker HTTP/9.attacker",
    # a NUL in the path
    b"GET /orders/attacker\x00 HTTP/1.1",
    # longer than limit_request_line
    b"GET /" + b"attacker" * 700 + b" HTTP/1.1",
]


def test_gunicorn_logs_a_malformed_request_without_the_client_address_or_what_it_sent(servers):
    live = LiveServer(servers, workers=1, threads=2)
    # the production settings
    live.args[3:3] = ["-c", "python:webapp.gunicorn_conf"]
    with live:
        for line in MALFORMED:
            # From 127.0.0.2: gunicorn's own "Listening at" line names 127.0.0.1.
            with socket.create_connection(
                ("127.0.0.1", live.port), timeout=10, source_address=("127.0.0.2", 0)
            ) as sock:
                sock.sendall(line + b"\r\n\r\n")
                # gunicorn logs before it answers
                answer = sock.recv(100)
            assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 414")), answer
        output = live.output()
    lines = json_lines(output)
    refused = [line for line in lines if line["message"].lower().startswith("invalid request")]
    print(*(line["message"] for line in refused), sep="\n")
    assert len(refused) == len(MALFORMED)
    assert all(
        line["logger"] == "gunicorn.error" and line["level"] == "WARNING" for line in refused
    )
    assert "127.0.0.2" not in output and "attacker" not in output


def test_gunicorns_error_handling_a_request_line_keeps_its_traceback_but_not_the_path():
    """What gunicorn logs when the app itself raised (Flask answers 500 before that, so
    this is a filter's test, not a server's): the path may hold an order's key."""
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.getLogger("gunicorn.error").makeRecord(
            "gunicorn.error",
            logging.ERROR,
            __file__,
            1,
            "Error handling request %s %s",
            ("GET", "/orders/Xk3-private-key-of-22"),
            sys.exc_info(),
        )
    assert NoClientDetails().filter(record)
    line = json.loads(JsonLines().format(record))
    assert line["message"] == "error handling a request" and line["error"] == "RuntimeError"
    assert "private-key" not in json.dumps(line)
