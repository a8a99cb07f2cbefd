"""A form with a step outside the database (``then=``): the checkout charges a card at a
provider once per submission, whatever the user, the network or the provider does. The
provider lives in the test (checkout_app.Provider) and counts every call by its
idempotency key; after every test no connection is idle in a transaction and no advisory
lock or lease is held (``nothing_held``, ``no_lease_left``)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from checkout_app import Order
from flask_submit_once import signals
from flask_submit_once._runner import Lease, LeaseLost
from flask_submit_once.testing import OnceForms
from servers import end_connection

ADA = {"email": "ada@example.com", "cents": "1250"}
GRACE = {"email": "grace@example.com", "cents": "990"}
pytestmark = pytest.mark.usefixtures("nothing_held", "no_lease_left")


@pytest.fixture
def app(make_checkout):
    return make_checkout()


@pytest.fixture
def client(app):
    return app.test_client()


def kept(answer, status: int, words: str) -> None:
    assert answer.status_code == status and words in answer.text, answer.text[:400]
    assert 'value="ada@example.com"' in answer.text and 'value="1250"' in answer.text


def another_worker(make_checkout, once_forms):
    """The same browser, answered by another process of the app (nothing remembered)."""
    client = make_checkout().test_client()
    client.set_cookie("session", once_forms.client.get_cookie("session").value)
    return client


@pytest.mark.parametrize(
    "duplicates, pool",
    [
        (20, None),
        (10, {"pool_size": 2, "max_overflow": 0, "pool_timeout": 5}),
    ],
    ids=["twenty", "ten-on-a-pool-of-two"],
)
def test_duplicates_at_once_make_one_order_charged_once_and_all_land_on_it(
    make_checkout, provider, orders, duplicates, pool
):
    """The first charge waits until every duplicate has reached the app: they all arrive
    while it runs (waiting for it holds no connection, so a pool of two serves ten)."""
    app = make_checkout(pool=pool)
    once_forms = OnceForms(app.test_client())
    entered = []

    # every request that reached the app
    def counting(wsgi):
        def app_(environ, start_response):
            entered.append(environ["PATH_INFO"])
            provider.poke()
            return wsgi(environ, start_response)

        return app_

    decided: list[str] = []
    page = once_forms.open("/checkout")
    app.wsgi_app = counting(app.wsgi_app)
    provider.hold(until=lambda: len(entered) == duplicates)
    with signals.submit_decided.connected_to(
        lambda sender, outcome, **extra: decided.append(outcome.kind), sender=app
    ):
        answers = page.submit_concurrently([ADA] * duplicates)
    assert {(a.status_code, a.headers.get("Location")) for a in answers} == {(303, "/orders/1")}
    assert sorted(decided) == ["created"] + ["duplicate"] * (duplicates - 1)
    assert list(provider.calls.values()) == [1] and orders() == [("ada@example.com", "ch_1", None)]


def test_one_submission_sends_one_key_every_time_and_the_next_submission_another(
    app, once_forms, provider, orders
):
    from checkout_app import submit_once

    provider.mode = "fail"
    page = once_forms.open("/checkout")
    assert page.submit(ADA).status_code == 503
    provider.mode = "ok"
    with app.app_context():
        assert submit_once.resume() == {"created": 1}
    assert once_forms.open("/checkout").submit(GRACE).status_code == 303
    first, resumed, other = provider.keys
    assert first == resumed != other and len(first) >= 32
    # never anything the client chose
    assert page.token not in provider.keys
    assert orders() == [("ada@example.com", "ch_1", None), ("grace@example.com", "ch_2", None)]


def test_a_declined_card_shows_the_form_again_with_a_fresh_token_and_so_does_its_repeat(
    once_forms, provider, orders
):
    provider.mode = "decline"
    page = once_forms.open("/checkout")
    declined = page.submit(ADA)
    kept(declined, 409, "Your card was declined (insufficient funds).")
    fresh = once_forms.page("/checkout", declined.text)
    assert fresh.token not in (None, page.token)
    assert orders() == [("ada@example.com", None, "refused")]
    # Back + submit: the declined rendering once more
    again = page.submit(ADA)
    kept(again, 409, "could not be accepted")
    assert once_forms.page("/checkout", again.text).token not in (None, page.token)
    # a declined card is not tried again
    assert sum(provider.calls.values()) == 1
    provider.mode = "ok"
    # another card, say
    assert fresh.submit(ADA).headers["Location"] == "/orders/2"
    assert orders() == [("ada@example.com", None, "refused"), ("ada@example.com", "ch_1", None)]
    # the new submission: a key of its own
    assert len(provider.calls) == 2


@pytest.mark.parametrize("worker", ["same", "another"])
def test_a_provider_that_drops_the_connection_leaves_the_order_marked_and_the_resubmit_charges_it(
    make_checkout, once_forms, provider, orders, worker
):
    """The resubmit's form is invalid by now (its own order has the address): it is the
    repeat of that order all the same, and finishes its step."""
    provider.mode = "fail"
    page = once_forms.open("/checkout")
    lost = page.submit(ADA)
    kept(lost, 503, "could not confirm whether this was saved")
    assert lost.headers["Retry-After"] == "5"
    assert once_forms.page("/checkout", lost.text).token == page.token
    assert orders() == [("ada@example.com", None, "charge")]
    provider.mode = "ok"
    client = another_worker(make_checkout, once_forms) if worker == "another" else None
    done = page.submit(ADA, client=client)
    assert (done.status_code, done.headers.get("Location")) == (303, "/orders/1")
    assert orders() == [("ada@example.com", "ch_1", None)]
    (key,) = provider.calls
    # once more, with the same key
    assert provider.calls[key] == 2
    assert page.submit(ADA).headers["Location"] == "/orders/1" and provider.calls[key] == 2


@pytest.mark.ends_server_connection
def test_a_database_lost_after_the_charge_is_unconfirmed_and_the_resubmit_gets_the_same_charge(
    once_forms, provider, orders, engine
):
    """The connection that records the charge dies after the provider charged, before the
    order says so: the user is told it could not be confirmed (never a 500), the order
    stays marked, and the resubmit sends the same key, so the provider answers with the
    charge it made."""
    charged: list[bool] = []
    ended: list[int] = []

    # the first statement after the charge: the order's UPDATE that records it
    def end_the_recording_connection(conn, cursor, statement, *_) -> None:
        if charged and not ended and statement.startswith("UPDATE"):
            ended.append(cursor.connection.info.backend_pid)
            end_connection(engine, ended[0])

    provider.after = lambda: charged.append(True)
    page = once_forms.open("/checkout")
    event.listen(engine, "before_cursor_execute", end_the_recording_connection)
    try:
        lost = page.submit(ADA)
    finally:
        event.remove(engine, "before_cursor_execute", end_the_recording_connection)
    assert ended, "the charge was never recorded"
    kept(lost, 503, "could not confirm whether this was saved")
    assert once_forms.page("/checkout", lost.text).token == page.token
    assert orders() == [("ada@example.com", None, "charge")]
    provider.after = None
    assert page.submit(ADA).headers["Location"] == "/orders/1"
    assert orders() == [("ada@example.com", "ch_1", None)]
    assert list(provider.calls.values()) == [2] and list(provider.charges.values()) == ["ch_1"]


@pytest.mark.ends_server_connection
def test_a_database_lost_before_the_step_takes_its_lease_is_unconfirmed_not_an_error_page(
    once_forms, provider, orders, engine
):
    """PostgreSQL goes away between the order's COMMIT and the step's lease (a failover):
    the step cannot begin. Before: the error went out to the app (a 500 in an
    app without a handler). Now: could not confirm (503, the input, the same token), no
    call to the provider, and that token, sent again, charges the order once."""
    ended: list[int] = []

    def end_the_steps_connection(conn, cursor, statement, parameters, context, many) -> None:
        # the UPDATE that takes the row's lease
        if statement.startswith("UPDATE") and "lease_owner=" in statement and not ended:
            ended.append(cursor.connection.info.backend_pid)
            end_connection(engine, ended[0])

    page = once_forms.open("/checkout")
    event.listen(engine, "before_cursor_execute", end_the_steps_connection)
    try:
        lost = page.submit(ADA)
    finally:
        event.remove(engine, "before_cursor_execute", end_the_steps_connection)
    assert ended, "the step never took its lease"
    kept(lost, 503, "could not confirm whether this was saved")
    assert provider.calls == {} and orders() == [("ada@example.com", None, "charge")]
    assert once_forms.page("/checkout", lost.text).token == page.token
    assert page.submit(ADA).headers["Location"] == "/orders/1"
    assert orders() == [("ada@example.com", "ch_1", None)]
    assert list(provider.calls.values()) == [1]


@pytest.mark.parametrize("who", ["submit", "resubmit", "sweeper"])
def test_no_connection_is_idle_in_a_transaction_while_the_step_calls_the_provider(
    app, once_forms, provider, nothing_held, leases, who
):
    from checkout_app import submit_once

    page = once_forms.open("/checkout")
    if who != "submit":
        provider.mode = "fail"
        assert page.submit(ADA).status_code == 503
    provider.hold()

    def act() -> None:
        if who == "sweeper":
            with app.app_context():
                submit_once.resume()
        else:
            page.submit(ADA, client=once_forms.clone())

    acting = threading.Thread(target=act)
    acting.start()
    try:
        assert provider.entered.wait(30)
        idle, locks = nothing_held()
        held = leases()
    finally:
        provider.release()
        acting.join(30)
    assert (idle, locks) == (0, 0)
    # the order's lease alone, held by whoever charges, for a while yet
    ((owner, until),) = held
    assert owner and until > datetime.now(UTC)


def test_a_holder_that_outlived_its_lease_records_nothing_and_the_next_holder_records_it(
    make_checkout, once_forms, provider, orders, checkout_tables
):
    """A holder stalled past its lease (never renewed) finds it taken when it comes back:
    what it wrote is not committed, and the holder that took the lease records the step.
    One holder records a step, whatever the clocks and the stalls."""
    provider.mode = "fail"
    assert once_forms.open("/checkout").submit(ADA).status_code == 503
    with Session(checkout_tables) as db:
        digest = db.scalars(select(Order.submission_digest)).one()
    stalled = Lease(checkout_tables, Order, digest, "charge", 0.05)
    assert stalled.take(wait=0)
    time.sleep(0.1)
    taker = Lease(checkout_tables, Order, digest, "charge", 30)
    assert taker.take(wait=0) and taker.held
    with Session(checkout_tables) as db:
        db.get(Order, 1).charge_id = "ch_stalled"
        db.get(Order, 1).submission_step = None
        with pytest.raises(LeaseLost):
            stalled.commit_with(db)
        db.rollback()
    assert orders() == [("ada@example.com", None, "charge")]
    with Session(checkout_tables) as db:
        db.get(Order, 1).charge_id = "ch_taker"
        db.get(Order, 1).submission_step = None
        taker.commit_with(db)
    assert orders() == [("ada@example.com", "ch_taker", None)]
