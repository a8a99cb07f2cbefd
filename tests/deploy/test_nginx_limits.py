"""One client address against the shop behind Debian's nginx with docs/nginx.conf and
DEPLOY.md's main-config edits (before them, one address holding 1,600 idle connections
took the shop offline: "768 worker_connections are not enough"). Other loopback addresses
(127.0.0.2 …) stand for other clients; every connection goes to 127.0.0.1, and each
case stops by itself."""

from __future__ import annotations

import http.client
import resource
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.support.live import LiveServer
from tests.support.nginx import Nginx, Shopper, fetch, needs_nginx, nginx, production_gunicorn

# what one address held when it took the shop offline
IDLE_CONNECTIONS = 1600
PROBES = 10
# a load balancer's health-check timeout
PROBE_SECONDS = 3.0
# docs/nginx.conf's limit_req and limit_conn
RATE, BURST, IN_PROGRESS = 10, 40, 32


@pytest.fixture(scope="module")
def shop(servers, tmp_path_factory) -> Iterator[tuple[LiveServer, Nginx]]:
    with (
        production_gunicorn(servers, TRUSTED_PROXIES="1") as live,
        nginx(tmp_path_factory.mktemp("nginx"), live.port) as site,
    ):
        yield live, site


#: The first bytes of a TLS handshake record that announces 512 bytes, none of which come.
#: A connection that sent nothing yet nginx may close when it runs short; one that began
#: its handshake (or its request) it must keep until client_header_timeout.
BEGUN = b"\x16\x03\x01\x02\x00"


@contextmanager
def held_open(port: int, count: int, source: str) -> Iterator[Callable[[], int]]:
    """``count`` connections from ``source`` that begin a TLS handshake and go silent; one
    that nginx closes is opened again at once, as that address's client did every 10 s.
    Yields how many are open now."""
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        sock = socket.socket()
        sock.bind((source, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        sock.sendall(BEGUN)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)

    for _ in range(count):
        open_one()
    stop = threading.Event()

    def reopen_closed() -> None:
        while not stop.is_set():
            for key, _ in selector.select(0.1):
                selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                if not stop.is_set():
                    open_one()

    thread = threading.Thread(target=reopen_closed, daemon=True)
    thread.start()
    try:
        yield lambda: len(selector.get_map())
    finally:
        stop.set()
        thread.join(5)
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()


def timed(call: Callable[[], int], expected: int) -> float | None:
    """Seconds ``call`` took to answer ``expected``, or None: no such answer in time."""
    started = time.monotonic()
    try:
        return time.monotonic() - started if call() == expected else None
    # a timeout, or the form page did not come
    except (OSError, AssertionError):
        return None


def summary(seconds: list[float | None]) -> str:
    answered = [s for s in seconds if s is not None]
    times = (
        f", median {statistics.median(answered) * 1000:.0f} ms, max {max(answered) * 1000:.0f} ms"
        if answered
        else ""
    )
    return f"{len(answered)} answered, {len(seconds) - len(answered)} failed{times}"


@needs_nginx
def test_one_address_holding_1600_idle_connections_leaves_healthz_and_the_form_answering(shop):
    _, site = shop
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE_CONNECTIONS + 500:
        pytest.skip(f"this process may open {hard} files, fewer than the connections held")
    if soft != resource.RLIM_INFINITY and soft < IDLE_CONNECTIONS + 500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (IDLE_CONNECTIONS + 500, hard))
    shopper = Shopper(site, source="127.0.0.3")
    health: list[float | None] = []
    submits: list[float | None] = []
    held: list[int] = []
    with held_open(site.ports.https, IDLE_CONNECTIONS, source="127.0.0.4") as open_now:
        for _ in range(PROBES):
            held.append(open_now())
            health.append(
                timed(
                    lambda: (
                        fetch(site.ports.plain, "GET", "/healthz", timeout=PROBE_SECONDS).status
                    ),
                    200,
                )
            )
            submits.append(timed(lambda: shopper.place_order(PROBE_SECONDS).status, 303))
        held.append(open_now())
    print(
        f"\n{min(held)}-{max(held)} connections held silent mid-handshake from one address; "
        f"/healthz: {summary(health)}; the form and its submit: {summary(submits)}"
    )
    # all held, but one just reopened
    assert min(held) >= IDLE_CONNECTIONS - 10, held
    assert None not in health and None not in submits
    assert "worker_connections are not enough" not in site.log("error.log")


@needs_nginx
def test_one_address_over_its_rate_gets_429_while_another_is_served(shop):
    _, site = shop
    conn = http.client.HTTPConnection(
        "127.0.0.1", site.ports.plain, timeout=10, source_address=("127.0.0.5", 0)
    )
    statuses = []
    started = time.monotonic()
    try:
        for _ in range(2 * BURST):
            conn.request("GET", "/static/app.css", headers={"Host": "127.0.0.1"})
            answer = conn.getresponse()
            answer.read()
            statuses.append(answer.status)
    finally:
        conn.close()
    elapsed = time.monotonic() - started
    other = fetch(site.ports.plain, "GET", "/static/app.css", source="127.0.0.6")
    print(
        f"\n{len(statuses)} requests in {elapsed:.2f} s from one address: "
        f"{statuses.count(200)} served, {statuses.count(429)} refused (429)"
    )
    assert set(statuses) == {200, 429}
    # The burst and the first request, then RATE a second, however fast this machine is.
    assert statuses.count(200) <= BURST + 1 + RATE * elapsed + 1
    assert other.status == 200


@needs_nginx
def test_one_address_gets_429_past_its_requests_in_progress_while_another_is_served(shop):
    """Submits whose bodies never come hold a request each until client_body_timeout."""
    _, site = shop
    head = (
        b"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
    )
    sockets = []
    selector = selectors.DefaultSelector()
    try:
        for _ in range(IN_PROGRESS + 8):
            sock = socket.socket()
            sock.bind(("127.0.0.7", 0))
            sock.connect(("127.0.0.1", site.ports.plain))
            sock.sendall(head)
            sockets.append(sock)
            selector.register(sock, selectors.EVENT_READ)
        refused: list[bytes] = []
        # before client_body_timeout (10 s) answers the rest
        deadline = time.monotonic() + 8
        while len(refused) < 8 and time.monotonic() < deadline:
            for key, _ in selector.select(0.5):
                refused.append(key.fileobj.recv(100))  # type: ignore[union-attr]
                selector.unregister(key.fileobj)
        still_waiting = len(selector.select(0))
        other = Shopper(site, source="127.0.0.8").place_order()
    finally:
        for sock in sockets:
            sock.close()
        selector.close()
    print(f"\n{len(sockets)} submits in progress from one address: {len(refused)} refused")
    assert [answer.split(b"\r\n", 1)[0] for answer in refused] == [
        b"HTTP/1.1 429 Too Many Requests"
    ] * 8
    # the other 32 are in progress, waiting for their bodies
    assert still_waiting == 0
    assert other.status == 303
