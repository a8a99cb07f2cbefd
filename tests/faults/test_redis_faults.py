"""Redis stopped, restarted empty, flushed, or giving back a consumed token.

Every scenario ends with no duplicate order, every order the user was sent to
existing, and every failed submit showing the input with a way to retry.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

import pytest
import redis

from flask_submit_once.testing import OnceForms
from tests.conftest import VALID, flashed, hidden, token_keys
from tests.faults.steps import (
    assert_told_orders_exist,
    form_kept,
    open_form,
    order_path,
    placed,
    same_browser,
    submit,
)
from webapp.orders import EXPIRED, UNAVAILABLE

#: The library's defaults, which a shop may choose: no form is drawn, and no submit decided,
#: without Redis. The shop's own draws forms with signed tokens (test_redis_away.py).
STRICT = {
    "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS": False,
    "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS": False,
}


def test_1_without_signed_forms_redis_down_before_render_gives_a_try_again_page(
    fault_app, fault_servers
):
    client = fault_app(**STRICT).test_client()
    fault_servers.redis.stop()
    response = client.get("/orders/new")
    html = response.get_data(as_text=True)
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert "We are briefly unavailable" in html and "try again in a few moments" in html
    assert "Traceback" not in html and "Error" in html
    # liveness stays up: restarting us would not help
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.get_json()["checks"]["redis"]["status"] == "down"
    # readiness takes this instance out of rotation
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.get_json()["checks"]["redis"]["status"] == "down"
    fault_servers.redis.start()
    assert client.get("/orders/new").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_2_with_the_fallback_redis_down_between_render_and_submit_places_one_order(
    fault_app, fault_servers
):
    app = fault_app(SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=True)
    client = app.test_client()
    tokens = open_form(client)
    fault_servers.redis.stop()
    # A double click and eight more tabs retrying, all while Redis is away.
    responses: list = []
    browsers = [same_browser(app, client) for _ in range(10)]
    threads = [
        threading.Thread(target=lambda b=b: responses.append(submit(b, tokens))) for b in browsers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(responses) == 10
    assert {order_path(r) for r in responses} == {f"/orders/{placed(fault_servers)[0]}"}
    fresh = [r for r in responses if "already_placed" not in flashed(r)]
    assert len(fresh) == 1, "one submit placed the order; the others landed on it"
    # The confirmation page shows during the outage too (without a Cancel button).
    confirmation = client.get(fresh[0].headers["Location"])
    assert confirmation.status_code == 200
    assert placed(fault_servers)[0] in confirmation.get_data(as_text=True)
    # Redis comes back with the token still live (it persists): the UNIQUE
    # column stops the GETDEL that now succeeds from placing a second order.
    fault_servers.redis.start()
    again = submit(client, tokens)
    assert order_path(again) == order_path(responses[0])
    assert "already_placed" in flashed(again)
    assert_told_orders_exist(client, *responses, again)
    assert len(placed(fault_servers)) == 1


def test_2_without_the_fallback_redis_down_at_submit_keeps_the_input_for_later(
    fault_app, fault_servers
):
    client = fault_app(**STRICT).test_client()
    tokens = open_form(client)
    fault_servers.redis.stop()
    response = submit(client, tokens)
    assert form_kept(response, 503, UNAVAILABLE) == tokens["form_token"]
    assert response.headers["Retry-After"] == "5"
    assert placed(fault_servers) == []
    fault_servers.redis.start()
    done = submit(client, tokens)
    assert "already_placed" not in flashed(done)
    assert_told_orders_exist(client, done)
    assert len(placed(fault_servers)) == 1


@pytest.mark.parametrize("loss", ["restarted-empty", "flushall"])
def test_3_redis_losing_every_token_between_render_and_submit_says_form_expired(
    fault_app, fault_servers, loss
):
    client = fault_app().test_client()
    tokens = open_form(client)
    if loss == "restarted-empty":
        fault_servers.restart_redis_empty()
    else:
        with redis.Redis.from_url(fault_servers.redis.url) as rdb:
            rdb.flushall()
    response = submit(client, tokens)
    fresh = form_kept(response, 409, EXPIRED)
    assert fresh != tokens["form_token"] and placed(fault_servers) == []
    done = submit(client, {**tokens, "form_token": fresh})
    assert_told_orders_exist(client, done)
    # The old page resubmitted once more: refused again, never a second order.
    assert submit(client, tokens).status_code == 409
    assert len(placed(fault_servers)) == 1


def test_4_a_consumed_token_that_reappears_lands_on_the_existing_order(fault_app, fault_servers):
    client = fault_app().test_client()
    tokens = open_form(client)
    rdb = redis.Redis.from_url(fault_servers.redis.url, decode_responses=True)
    try:
        (key,) = token_keys(rdb)
        first = submit(client, tokens)
        # a replica promoted before it saw the GETDEL
        rdb.set(key, 1, ex=60)
        again = submit(client, tokens)
        assert order_path(again) == order_path(first)
        assert "already_placed" in flashed(again)
        assert rdb.exists(key) == 0, "the reappeared token was consumed, not left live"
    finally:
        rdb.close()
    assert_told_orders_exist(client, first, again)
    assert len(placed(fault_servers)) == 1


def test_1_without_signed_forms_redis_down_when_a_lost_session_needs_a_fresh_form_keeps_input(
    fault_app, fault_servers
):
    """No fresh token can be had for the new session: the form comes back (503) with the
    input and the token it was sent with; once Redis is back, that submit is told the
    form expired (a fresh token), and the next places the order once."""
    client = fault_app(**STRICT).test_client()
    tokens = open_form(client)
    client.delete_cookie("session")
    fault_servers.redis.stop()
    response = submit(client, tokens)
    html = response.get_data(as_text=True)
    assert response.status_code == 503 and UNAVAILABLE in html.replace("&#39;", "'")
    assert 'value="Ada Lovelace"' in html and hidden(html, "form_token") == tokens["form_token"]
    fault_servers.redis.start()
    again = OnceForms(client).page("/orders/new", html).submit(VALID)
    # bound to the lost session: expired, input kept
    assert again.status_code == 409
    assert OnceForms(client).page("/orders/new", again.text).submit(VALID).status_code == 303
    assert len(placed(fault_servers)) == 1


@contextmanager
def redis_hung(servers):
    """Redis stops answering without closing anything (SIGSTOP: a frozen VM, a long fork)."""
    os.kill(servers.redis.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(servers.redis.process.pid, signal.SIGCONT)


def test_5_a_hung_redis_costs_a_form_one_socket_timeout_not_a_hung_page(fault_app, fault_servers):
    client = fault_app(**STRICT).test_client()
    # the store's connection is open
    assert client.get("/orders/new").status_code == 200
    with redis_hung(fault_servers):
        started = time.monotonic()
        response = client.get("/orders/new")
        took = time.monotonic() - started
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert 1.5 < took < 3.5, f"{took:.1f} s: one 2 s timeout, the command not sent again"
    # and the next form opens
    assert client.get("/orders/new").status_code == 200


def test_5_a_hung_redis_at_submit_answers_in_one_timeout_and_the_resubmits_place_one_order(
    fault_app, fault_servers
):
    """The GETDEL was sent when Redis froze: whether it ran is unknown until Redis wakes,
    and when it does it may run it. The customer is told nothing was placed, keeps the
    input, and resubmitting gets either the order or the form again (input kept, a
    fresh token) whose submit places it: one order in the end, never two."""
    client = fault_app(**STRICT).test_client()
    tokens = open_form(client)
    with redis_hung(fault_servers):
        started = time.monotonic()
        response = submit(client, tokens)
        took = time.monotonic() - started
    assert form_kept(response, 503, UNAVAILABLE) == tokens["form_token"]
    assert 1.5 < took < 3.5, f"{took:.1f} s: one 2 s timeout, the GETDEL not sent again"
    assert placed(fault_servers) == []
    again = submit(client, tokens)
    # the frozen GETDEL ran when Redis woke
    if again.status_code == 409:
        fresh = form_kept(again, 409, EXPIRED)
        again = submit(client, {**tokens, "form_token": fresh})
    assert again.status_code == 303
    assert_told_orders_exist(client, again)
    assert len(placed(fault_servers)) == 1
