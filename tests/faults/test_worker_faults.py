"""A gunicorn worker killed, timed out or abandoned by its client mid-submit.

The worker is paused by a test hook (tests/support/paused_app.py) after GETDEL or
after the commit, and announces its pid; the test then kills it, lets gunicorn
time it out, or hangs up. The user's reload (the same POST again) goes to a
healthy app instance on the same servers, as it would behind a load balancer.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
import urllib.parse

import pytest
import redis

from tests.conftest import flashed
from tests.faults.steps import assert_told_orders_exist, form_kept, order_path, placed, submit
from tests.support.live import LiveServer, open_form
from webapp.orders import EXPIRED, FORM, NOT_PLACED


def paused_pid(live: LiveServer, where: str, timeout: float = 30) -> int:
    """The pid of the worker the hook paused after ``where``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(rf"paused after {where} in pid (\d+)", live.output())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no worker paused after {where}:\n{live.output()[-2000:]}")


def post_in_background(port: int, cookie: str, form: dict[str, str]) -> threading.Thread:
    """POST the form from a thread; it ends when the server answers or hangs up."""

    def post():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request(
                "POST",
                "/orders",
                body=urllib.parse.urlencode(form),
                headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
            )
            conn.getresponse().read()
        except (ConnectionError, http.client.HTTPException):
            # the worker died under it: what the browser shows as a network error
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def browser_after(app, cookie: str):
    """The same browser (session cookie) talking to another app instance."""
    client = app.test_client()
    client.set_cookie("session", cookie.removeprefix("session="))
    return client


def token_is_live(app, cookie: str, token: str) -> bool:
    """Whether the Redis key of ``token``, as bound to this session, exists."""
    data = app.session_interface.get_signing_serializer(app).loads(cookie.removeprefix("session="))
    store = app.extensions["submit_once"].store
    key = store.key(store.digest(token, session_id=data["_submit_once_sid"], form=FORM))
    with redis.Redis.from_url(app.config["REDIS_URL"]) as rdb:
        return rdb.exists(key) == 1


def test_7_client_hanging_up_mid_submit_neither_stops_the_order_nor_revives_its_token(
    fault_app, fault_servers
):
    with LiveServer(fault_servers, workers=1, threads=4, TEST_PAUSE_AFTER_CONSUME="1") as live:
        cookie, form = open_form(live.port)
        app = fault_app()
        assert token_is_live(app, cookie, form["form_token"])
        body = urllib.parse.urlencode(form).encode()
        with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
            sock.sendall(
                b"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: "
                + cookie.encode()
                + b"\r\nContent-Type: application/x-www-form-"
                b"urlencoded\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            paused_pid(live, "consume")
        # The browser is gone; the request finishes its work all the same.
        deadline = time.monotonic() + 30
        while not placed(fault_servers) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(placed(fault_servers)) == 1
    assert not token_is_live(app, cookie, form["form_token"])
    browser = browser_after(app, cookie)
    reload = submit(browser, {"csrf_token": form["csrf_token"], "form_token": form["form_token"]})
    assert order_path(reload) == f"/orders/{placed(fault_servers)[0]}"
    assert "already_placed" in flashed(reload)
    assert len(placed(fault_servers)) == 1


@pytest.mark.parametrize("where", ["consume", "commit"])
def test_7_worker_timeout_mid_submit_never_restores_the_token(fault_app, fault_servers, where):
    # A sync worker (one thread) with a 2 s timeout: gunicorn aborts it, which
    # raises SystemExit inside the request, unwinding every finally on its way.
    server = LiveServer(
        fault_servers, workers=1, threads=1, **{f"TEST_PAUSE_AFTER_{where.upper()}": "60"}
    )
    server.args[-1:-1] = ["--timeout", "2"]
    with server as live:
        cookie, form = open_form(live.port)
        posting = post_in_background(live.port, cookie, form)
        paused_pid(live, where)
        posting.join(60)
        assert not posting.is_alive() and "WORKER TIMEOUT" in live.output()
    committed = where == "commit"
    assert len(placed(fault_servers)) == int(committed)
    app = fault_app()
    assert not token_is_live(app, cookie, form["form_token"]), "the token was restored"
    browser = browser_after(app, cookie)
    tokens = {"csrf_token": form["csrf_token"], "form_token": form["form_token"]}
    reload = submit(browser, tokens)
    if committed:
        assert order_path(reload) == f"/orders/{placed(fault_servers)[0]}"
        assert "already_placed" in flashed(reload)
    else:
        html = reload.get_data(as_text=True)
        fresh = form_kept(reload, 409, EXPIRED if EXPIRED in html else NOT_PLACED)
        assert_told_orders_exist(browser, submit(browser, {**tokens, "form_token": fresh}))
    assert len(placed(fault_servers)) == 1
