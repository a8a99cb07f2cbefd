"""PostgreSQL stopped between GETDEL and commit, and PostgreSQL too slow to answer.

Every scenario ends with no duplicate order, every order the user was sent to
existing, and every failed submit showing the input with a way to retry.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, hidden
from tests.faults.steps import (
    assert_told_orders_exist,
    form_kept,
    open_form,
    order_path,
    placed,
    same_browser,
    submit,
)
from tests.support.pauses import after_consume
from webapp.orders import NOT_CONFIRMED, NOT_PLACED, UNAVAILABLE, catalogue
from webapp.orders.messages import STILL_RUNNING

WAITING = 3


def in_threads(calls, timeout: float) -> list:
    """Run each call in its own thread; every one must finish within ``timeout``."""
    results: list = [None] * len(calls)

    def run(i, call):
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"a request hung past {timeout}s"
    return results


def test_5_postgres_down_between_consume_and_commit_places_nothing_and_retry_places_one(
    fault_app, fault_servers
):
    app = fault_app(SUBMIT_ONCE_WAIT_SECONDS=30)
    consumed, release = threading.Event(), threading.Event()
    after_consume(app, lambda: (consumed.set(), release.wait(30)))
    client = app.test_client()
    tokens = open_form(client)
    first: dict = {}
    thread = threading.Thread(target=lambda: first.update(r=submit(client, tokens)))
    thread.start()
    assert consumed.wait(10)
    browsers = [same_browser(app, client) for _ in range(WAITING)]
    waiting: dict = {}
    waiters = [
        threading.Thread(target=lambda b=b: waiting.update({b: submit(b, tokens)}))
        for b in browsers
    ]
    for waiter in waiters:
        waiter.start()
    waiters[0].join(0.3)
    assert waiters[0].is_alive(), "the duplicates wait for the first submit"

    fault_servers.postgres.stop("immediate")
    release.set()
    thread.join(30)
    for waiter in waiters:
        waiter.join(30)
    assert not thread.is_alive() and not any(w.is_alive() for w in waiters)

    # The first lost its connection mid-transaction: it cannot know whether the
    # COMMIT landed, so it keeps the input and puts the same token back.
    assert form_kept(first["r"], 503, NOT_CONFIRMED) == tokens["form_token"]
    # The duplicates that were waiting: told nothing was placed, input kept.
    for response in waiting.values():
        form_kept(response, 503, UNAVAILABLE)

    fault_servers.postgres.start()
    after_consume(app, None)
    assert placed(fault_servers) == []
    done = submit(client, tokens)
    assert "already_placed" not in flashed(done)
    # A waiting tab retries with the token it was shown, the same one: it lands
    # on the order the retry placed, never a second order.
    for browser in browsers:
        again = submit(browser, tokens)
        assert order_path(again) == order_path(done)
        assert "already_placed" in flashed(again)
    assert_told_orders_exist(client, done)
    assert len(placed(fault_servers)) == 1


DUPLICATES = 20
# What a request may wait at most: pool_timeout + lock_timeout + the duplicate
# wait bound, all 5 s or less here; generous on a loaded two-core machine.
BOUND = 40


@pytest.mark.parametrize("table", ["orders", "products"])
def test_8_a_table_lock_held_past_every_timeout_gets_bounded_answers_and_no_pool_leak(
    fault_app, fault_servers, table
):
    app = fault_app(SUBMIT_ONCE_WAIT_SECONDS=3)
    engine = app.extensions["db"].kw["bind"]
    client = app.test_client()
    tokens = open_form(client)
    browsers = [same_browser(app, client) for _ in range(DUPLICATES)]
    with fault_servers.engine.connect() as locker:
        locker.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        started = time.monotonic()
        responses = in_threads([lambda b=b: submit(b, tokens) for b in browsers], BOUND)
        elapsed = time.monotonic() - started
        locker.rollback()
    statuses = sorted(r.status_code for r in responses)
    assert all(status in (409, 503) for status in statuses), statuses
    retry_tokens = set()
    for response in responses:
        html = response.get_data(as_text=True)
        # the form again, input and token kept (503)
        if STILL_RUNNING in html:
            retry_tokens.add(form_kept(response, 503, STILL_RUNNING))
            continue
        retry_tokens.add(
            form_kept(
                response,
                response.status_code,
                NOT_PLACED if response.status_code == 409 or NOT_PLACED in html else UNAVAILABLE,
            )
        )
    assert engine.pool.checkedout() == 0, "a request kept its connection"
    assert placed(fault_servers) == [], f"answered in {elapsed:.1f}s with nothing placed"
    # The lock is gone: the user's retry places exactly one order.
    retries = [
        submit(same_browser(app, client), {**tokens, "form_token": t}) for t in sorted(retry_tokens)
    ]
    assert sum(r.status_code == 303 for r in retries) >= 1
    assert_told_orders_exist(client, *retries)
    assert len(placed(fault_servers)) == 1


def test_8_a_table_lock_released_within_the_bound_lets_all_duplicates_land_on_one_order(
    fault_app, fault_servers
):
    app = fault_app()
    client = app.test_client()
    tokens = open_form(client)
    browsers = [same_browser(app, client) for _ in range(DUPLICATES)]
    with fault_servers.engine.connect() as locker:
        locker.execute(text("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE"))
        released = threading.Timer(1.0, locker.rollback)
        released.start()
        responses = in_threads([lambda b=b: submit(b, tokens) for b in browsers], BOUND)
        released.join()
    assert len({order_path(r) for r in responses}) == 1
    assert sum("already_placed" not in flashed(r) for r in responses) == 1
    assert app.extensions["db"].kw["bind"].pool.checkedout() == 0
    assert_told_orders_exist(client, *responses)
    assert len(placed(fault_servers)) == 1


def test_8_every_pooled_connection_busy_gives_a_503_with_the_input_not_a_500(
    fault_app, fault_servers
):
    app = fault_app()
    engine = app.extensions["db"].kw["bind"]
    client = app.test_client()
    tokens = open_form(client)
    busy = [engine.connect() for _ in range(engine.pool.size() + engine.pool._max_overflow)]
    try:
        # waits pool_timeout for a connection
        response = submit(client, tokens)
    finally:
        for connection in busy:
            connection.close()
    assert form_kept(response, 503, UNAVAILABLE) == tokens["form_token"]
    # the token was never spent
    done = submit(client, tokens)
    assert "already_placed" not in flashed(done)
    assert len(placed(fault_servers)) == 1


def test_a_lost_session_on_the_cancel_form_while_postgres_is_down_is_a_503_not_a_500(
    fault_app, fault_servers
):
    """The session cookie is gone (CSRF fails) and PostgreSQL is down: giving the cancel
    form back needs the order, which cannot be read. The answer is the 503 page that
    says to try again, never a 500 from inside the CSRF handler."""
    # a handler's error is a 500, as in production
    app = fault_app(PROPAGATE_EXCEPTIONS=False)
    client = app.test_client()
    path = order_path(submit(client, open_form(client)))
    html = client.get(f"{path}/cancel").get_data(as_text=True)
    tokens = {name: hidden(html, name) for name in ("csrf_token", "form_token")}
    client.delete_cookie("session")
    fault_servers.postgres.stop("immediate")
    response = client.post(f"{path}/cancellation", data=tokens)
    fault_servers.postgres.start()
    assert response.status_code == 503, response.get_data(as_text=True)[:500]
    assert response.headers["Retry-After"] == "5" and "try again" in response.text


def submit_while_postgres_is_down(client, tokens: dict[str, str], servers):
    """The order form sent with PostgreSQL stopped; started again once it is answered."""
    servers.postgres.stop("immediate")
    try:
        return submit(client, tokens)
    finally:
        servers.postgres.start()


def assert_the_outage_kept_the_form(response, tokens: dict[str, str]) -> None:
    """The outage's answer: 503 with Retry-After, the input, and the token it was sent with."""
    assert response.status_code == 503, response.status_code
    assert 'value="Ada Lovelace"' in response.text and response.headers["Retry-After"] == "5"
    assert hidden(response.text, "form_token") == tokens["form_token"]


def test_postgres_down_at_a_submit_that_may_ask_about_the_same_order_keeps_the_input(
    fault_app, fault_servers
):
    """The same-order question reads this session's recent orders while the form is
    validated, before the library's transaction: with PostgreSQL down that read must not
    turn the answer into the bare 503 page (the failover soak's one answer without the
    customer's input). The transaction asks again, and its outage answer keeps the form."""
    app = fault_app(SAME_ORDER_WINDOW_SECONDS=600)
    client = app.test_client()
    tokens = open_form(client)
    response = submit_while_postgres_is_down(client, tokens, fault_servers)
    assert_the_outage_kept_the_form(response, tokens)


def test_postgres_down_at_a_workers_first_submit_keeps_the_input_and_the_token(
    fault_app, fault_servers, monkeypatch
):
    """The form was drawn by one gunicorn worker and sent to another that has not read
    the catalogue yet; PostgreSQL goes down in between. That worker cannot know the
    products: the one sent stays chosen (the transaction reads it again), and the answer
    is the outage's (503, the input, the same token), not the bare 503 page that dropped
    what was typed (the failover soak's) nor "choose one of the products on sale"."""
    app = fault_app()
    client = app.test_client()
    tokens = open_form(client)
    # the other worker
    monkeypatch.setattr(catalogue, "_catalogue", (float("-inf"), []))
    response = submit_while_postgres_is_down(client, tokens, fault_servers)
    assert_the_outage_kept_the_form(response, tokens)
    assert UNAVAILABLE in response.text and "Choose one of the products" not in response.text
    chosen = re.search(r'<select[^>]*name="product".*?</select>', response.text, re.S)
    assert chosen and f'<option selected value="{VALID["product"]}">' in chosen.group(0)
    # PostgreSQL back: the same token places it
    placed_now = submit(client, tokens)
    assert placed_now.status_code == 303 and len(placed(fault_servers)) == 1
