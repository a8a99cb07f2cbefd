"""Order status transitions as conditional UPDATEs, on real PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from webapp.shop.order_states import OrderNotFound, TransitionRefused, transition

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def order_id(servers) -> int:
    with servers.engine.begin() as conn:
        return conn.scalar(
            text(
                "INSERT INTO orders (public_id, submission_digest, product_id, quantity, "
                "unit_price_cents, customer_name, email, shipping_address) VALUES "
                "(left(md5(random()::text), 22), md5(random()::text), 1, 1, 1800,"
                " 'A', 'a@b.c', 'X') "
                "RETURNING id"
            )
        )


def apply(servers, order_id: int, action: str, **values):
    with Session(servers.engine) as db, db.begin():
        return transition(db, order_id, action, **values)


def test_pay_then_ship(servers, order_id):
    assert apply(servers, order_id, "pay", paid_cents=1800).changed
    assert apply(servers, order_id, "ship").status == "shipped"


def test_cancelling_twice_is_a_success_without_effect(servers, order_id):
    assert apply(servers, order_id, "cancel").changed is True
    again = apply(servers, order_id, "cancel")
    assert again.changed is False and again.status == "cancelled"


def test_cancelling_a_shipped_order_is_refused_with_the_reason(servers, order_id):
    apply(servers, order_id, "pay", paid_cents=1800)
    apply(servers, order_id, "ship")
    with pytest.raises(TransitionRefused, match="An order that is shipped cannot be cancelled"):
        apply(servers, order_id, "cancel")


def test_values_are_written_only_if_the_transition_happens(servers, order_id):
    apply(servers, order_id, "cancel")
    with pytest.raises(TransitionRefused):
        apply(servers, order_id, "pay", paid_cents=1800)
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT paid_cents FROM orders")) == 0


def test_unknown_order(servers):
    with pytest.raises(OrderNotFound):
        apply(servers, 999_999, "cancel")


def test_refund_can_never_exceed_what_was_paid(servers, order_id):
    apply(servers, order_id, "pay", paid_cents=1800)
    with pytest.raises(Exception, match="orders_refund_within_paid"):
        with servers.engine.begin() as conn:
            conn.execute(text("UPDATE orders SET refunded_cents = 1801"))


def test_concurrent_cancel_and_ship_exactly_one_wins(servers, order_id):
    apply(servers, order_id, "pay", paid_cents=1800)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def attempt(action: str):
        barrier.wait()
        try:
            outcomes[action] = apply(servers, order_id, action)
        except TransitionRefused as refused:
            outcomes[action] = refused

    threads = [threading.Thread(target=attempt, args=(a,)) for a in ("cancel", "ship")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = [a for a, o in outcomes.items() if not isinstance(o, TransitionRefused)]
    assert len(winners) == 1
    with servers.engine.connect() as conn:
        final = conn.scalar(text("SELECT status FROM orders"))
    assert final == {"cancel": "cancelled", "ship": "shipped"}[winners[0]]
