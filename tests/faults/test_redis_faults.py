"""Redis stopped, flushed or frozen, as the shop's strict mode and its pages meet it.

The library's suite owns these scenarios (flask-submit-once/tests/test_redis_loss.py: Redis
away at a form's opening and at its submit, every token lost, a spent token back, a lost
session, the fallback's storm); the shop keeps one wiring test per promise it relies on:
its 503 page and /healthz and /readyz, its "expired" form, and its Redis socket timeout
(a frozen Redis, which the library's suite does not freeze).
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager

import redis

from tests.faults.steps import assert_told_orders_exist, form_kept, open_form, placed, submit
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


def test_3_redis_losing_every_token_between_render_and_submit_says_form_expired(
    fault_app, fault_servers
):
    """FLUSHALL here; a Redis restarted empty is the library's (test_redis_loss.py)."""
    client = fault_app().test_client()
    tokens = open_form(client)
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
    # one 2 s socket timeout; the command sent again would have taken a second one (4 s)
    assert 1.9 < took < 4.0, f"{took:.1f} s: one 2 s timeout, the command not sent again"
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
    # one 2 s socket timeout; the GETDEL sent again would have taken a second one (4 s)
    assert 1.9 < took < 4.0, f"{took:.1f} s: one 2 s timeout, the GETDEL not sent again"
    assert placed(fault_servers) == []
    again = submit(client, tokens)
    # the frozen GETDEL ran when Redis woke
    if again.status_code == 409:
        fresh = form_kept(again, 409, EXPIRED)
        again = submit(client, {**tokens, "form_token": fresh})
    assert again.status_code == 303
    assert_told_orders_exist(client, again)
    assert len(placed(fault_servers)) == 1
