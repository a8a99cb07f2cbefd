"""The refund worker's monitor (REFUND_MONITOR_BIND) against clients that misbehave or
pry: HEAD gets headers only, /healthz names no host or process and
answers only a Host that cannot be rebound, and idle connections cannot pile up.
Real worker processes; every connection goes to 127.0.0.1 and the counts are bounded."""

from __future__ import annotations

import os
import socket

import pytest

from dev.embedded import free_port
from tests.refunds.conftest import Worker, wait_until
from tests.refunds.test_worker_ops import served
from webapp.refunds.monitor import MAX_CONNECTIONS

# the connections a client held open in the review
IDLE = 1100


@pytest.fixture(scope="module")
def monitor(servers):
    """(port, worker) of a worker's monitor, once it answers: one worker for the
    module (each test's clean state empties Redis under it, which its consumer
    retries through; the monitor does not notice)."""
    port = free_port()
    worker = Worker(servers, REFUND_MONITOR_BIND=str(port))
    try:
        wait_until(lambda: served(port, "/healthz"), what="the monitor")
        yield port, worker
    finally:
        worker.close()


def raw(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send ``request`` as it is; (status line, headers, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


def test_head_answers_the_headers_of_a_get_and_no_body(monitor):
    port, _ = monitor
    status, headers, body = raw(port, b"HEAD /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == "HTTP/1.0 200 OK" and headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) > 0 and body == b""


def test_health_names_neither_the_host_nor_the_process(monitor):
    port, worker = monitor
    status, body = served(port, "/healthz")
    assert status == 200 and '"status": "ok"' in body
    assert socket.gethostname() not in body and f"-{worker.process.pid}" not in body


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1", "200 OK"),
        ("127.0.0.1:{port}", "200 OK"),
        ("localhost:{port}", "200 OK"),
        # what the Host says, not where it came from
        ("[::1]:{port}", "200 OK"),
        # a private listener scraped by address
        ("10.0.3.7:9108", "200 OK"),
        # DNS rebinding: a page's own name
        ("rebound.evil.example:{port}", "400 Bad Request"),
        ("localhost.evil.example", "400 Bad Request"),
        ("127.0.0.1.nip.io", "400 Bad Request"),
        ("", "400 Bad Request"),
        # no Host header at all
        (None, "400 Bad Request"),
    ],
)
def test_only_a_host_that_cannot_be_rebound_is_answered(monitor, host, status):
    port, _ = monitor
    header = b"" if host is None else f"Host: {host.format(port=port)}\r\n".encode()
    for path in (b"/healthz", b"/metrics"):
        answer = raw(port, b"GET " + path + b" HTTP/1.0\r\n" + header + b"\r\n")
        assert answer[0] == f"HTTP/1.0 {status}", (path, answer)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def answered(sockets: list[socket.socket]) -> list[bytes]:
    """What each socket the server has answered or closed holds (peeked, not read)."""
    seen = []
    for conn in sockets:
        try:
            seen.append(conn.recv(64, socket.MSG_PEEK))
        # nothing yet: the server holds it
        except BlockingIOError:
            continue
    return seen


def test_idle_connections_are_capped_and_health_answers_once_they_are_gone(monitor):
    port, worker = monitor
    pid = worker.process.pid
    before, peak = open_files(pid), 0
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            idle[-1].setblocking(False)

        def most_answered() -> list[bytes] | None:
            nonlocal peak
            peak = max(peak, open_files(pid) - before)
            seen = answered(idle)
            return seen if len(seen) >= IDLE - MAX_CONNECTIONS else None

        seen = wait_until(most_answered, what="the connections over the cap turned away")
        peak = max(peak, open_files(pid) - before)
        # Accepted in bursts of up to asyncio's backlog (100) before each is turned away;
        # on a loaded machine a few bursts land before the loop closes the last (293 seen
        # beside a test run): far from the 1,100 an uncapped worker holds.
        assert peak <= MAX_CONNECTIONS + 4 * 100 < IDLE / 2, peak
        busy = [data for data in seen if data.startswith(b"HTTP/1.0 503")]
        assert len(busy) >= IDLE - 2 * MAX_CONNECTIONS, len(busy)
    finally:
        for conn in idle:
            conn.close()
    wait_until(
        lambda: (served(port, "/healthz") or (0,))[0] == 200,
        what="/healthz once the idle connections are closed",
    )
    assert worker.process.poll() is None
