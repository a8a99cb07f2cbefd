"""Production as docs/DEPLOY.md describes it: gunicorn on loopback behind Debian's nginx
with docs/nginx.conf as shipped (tests/support/nginx.py): slow clients and X-Forwarded-For,
the shop's own page with the app stopped. The same nginx over TLS is
tests/deploy/test_nginx_https.py's, its logs and limits tests/deploy/test_nginx_logs.py's and
tests/deploy/test_nginx_limits.py's."""

from __future__ import annotations

import importlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookies import SimpleCookie

from dev.embedded import free_port
from tests.conftest import VALID, hidden
from tests.support.live import ROOT, request
from tests.support.nginx import (
    Shopper,
    fetch,
    needs_nginx,
    nginx,
    production_gunicorn,
)

SLOW_CLIENTS = 50
TRICKLE_SECONDS = 5.0


def test_gunicorn_listens_on_loopback_unless_told_otherwise(monkeypatch):
    """Only the proxy on the same machine can reach the app port: no slow client holds a
    gthread worker, and no client sends the X-Forwarded-For that TRUSTED_PROXIES trusts."""
    from webapp import gunicorn_conf

    monkeypatch.delenv("BIND", raising=False)
    assert importlib.reload(gunicorn_conf).bind == "127.0.0.1:8000"
    monkeypatch.setenv("BIND", "10.0.3.7:8000")
    assert importlib.reload(gunicorn_conf).bind == "10.0.3.7:8000"
    monkeypatch.delenv("BIND")
    importlib.reload(gunicorn_conf)


def slow_request(index: int) -> tuple[bytes, bytes]:
    """What one slow client sends: nothing at once and its headers at 1 byte/s, or its
    headers at once and the body at 1 byte/s (half of them each)."""
    if index % 2:
        return b"", f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: {index}\r\n\r\n".encode()
    body = b"product=1&quantity=1&name=Slow&email=slow%40example.com&address=x" * 2
    return (
        b"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    ), body


@contextmanager
def trickling(port: int) -> Iterator[list[socket.socket]]:
    """SLOW_CLIENTS connections to 127.0.0.1:``port`` that send a byte a second each, and
    close themselves after TRICKLE_SECONDS (or when the block ends)."""
    sockets, pending = [], []
    for index in range(SLOW_CLIENTS):
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        head, slow = slow_request(index)
        sock.sendall(head)
        sockets.append(sock)
        pending.append(slow)
    stop, sending = threading.Event(), threading.Event()

    def trickle() -> None:
        started = time.monotonic()
        while not stop.is_set() and time.monotonic() - started < TRICKLE_SECONDS:
            for sock, rest in zip(sockets, pending, strict=True):
                if rest:
                    try:
                        sock.send(rest[:1])
                    except OSError:
                        pass
            pending[:] = [rest[1:] for rest in pending]
            sending.set()
            stop.wait(1)
        for sock in sockets:
            sock.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        # every slow client has sent its head and a first byte of its body
        assert sending.wait(30), "the slow clients never started sending"
        yield sockets
    finally:
        stop.set()
        thread.join(TRICKLE_SECONDS + 2)


def timed(port: int) -> dict[str, float | str]:
    """Seconds for /healthz, the order form, and its submit, each with a 1 s budget."""
    figures: dict[str, float | str] = {}
    try:
        started = time.monotonic()
        assert request(port, "GET", "/healthz", timeout=1).status == 200
        figures["healthz"] = time.monotonic() - started
        started = time.monotonic()
        cookie, form = open_form_within(port, 1)
        figures["GET /orders/new"] = time.monotonic() - started
        started = time.monotonic()
        placed = request(port, "POST", "/orders", cookie=cookie, form=form, timeout=1)
        assert placed.status == 303, placed.body[:300]
        figures["POST /orders"] = time.monotonic() - started
    except TimeoutError:
        figures["timed out"] = f"after {', '.join(figures) or 'nothing'}"
    return figures


def open_form_within(port: int, timeout: float) -> tuple[str, dict[str, str]]:
    """tests.live.open_form with a time limit: the session cookie and the filled-in form."""
    page = request(port, "GET", "/orders/new", timeout=timeout)
    assert page.status == 200, page.body[:300]
    cookie = SimpleCookie(page.headers["set-cookie"])
    return f"session={cookie['session'].value}", {
        **VALID,
        "csrf_token": hidden(page.body, "csrf_token"),
        "form_token": hidden(page.body, "form_token"),
    }


@needs_nginx
def test_50_slow_clients_leave_healthz_and_a_submit_answering_within_a_second(servers, tmp_path):
    with production_gunicorn(servers) as live, nginx(tmp_path, live.port) as site:
        port = site.ports.plain
        # The same slow clients straight at gunicorn hold its threads: this is what
        # nginx is for, and shows the slow clients here are slow enough to matter.
        with trickling(live.port):
            direct = timed(live.port)
        # gunicorn finishes the requests the slow clients held back
        time.sleep(1)
        with trickling(port):
            proxied = timed(port)
    print(
        f"\n{SLOW_CLIENTS} clients at 1 byte/s; straight at gunicorn: {fmt(direct)}; "
        f"through nginx: {fmt(proxied)}"
    )
    assert "timed out" in direct, direct
    assert "timed out" not in proxied and all(
        isinstance(seconds, float) and seconds < 1 for seconds in proxied.values()
    ), proxied


def fmt(figures: dict[str, float | str]) -> str:
    return ", ".join(
        f"{name} {value:.3f} s" if isinstance(value, float) else f"{name} {value}"
        for name, value in figures.items()
    )


def form_views(port: int, forwarded_for: list[str]) -> list[int]:
    """Cookieless views of the order form, one a client claiming each address."""
    statuses = []
    for address in forwarded_for:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        with sock, sock.makefile("rb") as reply:
            sock.sendall(
                f"GET /orders/new HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"X-Forwarded-For: {address}\r\nConnection: close\r\n\r\n".encode()
            )
            statuses.append(int(reply.readline().split()[1]))
    return statuses


@needs_nginx
def test_behind_nginx_a_client_sent_x_forwarded_for_does_not_choose_the_bucket(servers, tmp_path):
    """Clients on 127.0.0.1 claiming different addresses share one per-client count
    through nginx; straight at the app port (why it binds to loopback) they would not.

    The count is per minute of the clock, in another process, and the views may straddle
    two minutes (gunicorn's boot alone can take half a minute on a loaded machine): any
    span holds at most twice the limit, 8 views. Four claimed addresses would each have a
    limit of their own if they chose the bucket: 16 views before a refusal."""
    claimed = ["203.0.113.1", "198.51.100.2", "192.0.2.3", "203.0.113.4"]
    with (
        production_gunicorn(
            servers, TRUSTED_PROXIES="1", SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE="4"
        ) as live,
        nginx(tmp_path, live.port) as site,
    ):
        through_nginx = form_views(site.ports.plain, claimed * 3)
        direct = form_views(live.port, [f"198.51.100.{n}" for n in range(10, 14)] * 2)
    # LiveServer's own readiness check spent one view of 127.0.0.1's four: three more pass
    # in any minute, and the 9th view at the latest is refused.
    assert through_nginx[:3] == [200, 200, 200] and 429 in through_nginx[:9], through_nginx
    # two views each, of four limits of their own
    assert direct == [200] * 8, direct


@needs_nginx
def test_with_the_app_stopped_nginx_answers_with_the_shops_own_page_and_no_version(tmp_path):
    """Was: nginx's own "502 Bad Gateway / nginx/1.22.1" page, version included.
    Nothing listens on the app's port, as when gunicorn is stopped or restarting."""
    with nginx(tmp_path, app_port=free_port()) as site:
        shopper = Shopper(site)
        answers = {
            "the order form": shopper.send("GET", "/orders/new"),
            "its submit": shopper.send("POST", "/orders", referer="/orders/new", form=VALID),
            "a health check": fetch(site.ports.plain, "GET", "/healthz"),
        }
    page = (ROOT / "static" / "errors" / "unavailable.html").read_text()
    for what, answer in answers.items():
        assert (answer.status, answer.body == page) == (502, True), (what, answer.body[:300])
        # server_tokens off
        assert answer.headers["server"] == "nginx", what
        assert answer.headers["content-type"] == "text/html", what
        assert answer.headers["retry-after"] == "30", what
        assert "default-src 'none'" in answer.headers["content-security-policy"], what
    assert "nginx" not in page and "We are briefly unavailable" in page
