"""A refund asked for while the order was paid, and reached after it shipped, needs
a person as one asked for after shipping does. The order's
status is checked where the money moves: in the worker's transaction and in the
requeue of a dead letter, not only when the customer submits."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from tests.refunds.conftest import (
    all_acked,
    refunds_of,
    request,
    requests_of,
    reserved_of,
    settled,
    wait_until,
)
from webapp.refunds.stream import DEAD_LETTERS
from webapp.shop.order_states import transition


def ship(servers, order_id: int) -> str:
    """Ship the order; returns its public id."""
    with Session(servers.engine) as db, db.begin():
        transition(db, order_id, "ship")
        return db.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order_id})


def request_id(servers, key: str) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT id FROM refund_requests WHERE idempotency_key = :k"), {"k": key}
        )


def test_a_request_made_before_shipping_and_reached_after_it_waits_for_review(
    servers, rdb, app, client, paid_order, start_worker
):
    order = paid_order(3600)
    # the worker is stopped: the row waits, requested
    key = request(servers, order, 1800)
    public_id = ship(servers, order)
    worker = start_worker()
    worker.wait_for("reading refunds")
    wait_until(
        lambda: all_acked(rdb) and requests_of(servers, order)[0][2] != "requested",
        what="the worker to settle the request",
    )
    assert requests_of(servers, order) == [(key, 1800, "review", None)]
    # goods gone, money kept
    assert refunds_of(servers, order) == (0, 0, "shipped")
    # still set aside for the operator
    assert reserved_of(servers, order) == 1800
    # printed after what the test waited on
    worker.wait_for("waits for review")
    assert "<strong>waiting for review</strong>" in client.get(f"/orders/{public_id}").text

    approved = app.test_cli_runner().invoke(
        args=["refunds", "approve", str(request_id(servers, key))]
    )
    assert approved.exit_code == 0, approved.output
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the approved request applied")
    assert requests_of(servers, order)[0][1:3] == (1800, "applied")
    assert refunds_of(servers, order) == (1, 1800, "shipped") and reserved_of(servers, order) == 0


def lock_waiters(servers) -> int:
    """Backends (the worker's) waiting for a row lock."""
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        )


def test_an_order_shipping_while_the_worker_waits_for_its_row_is_seen_shipped(
    servers, rdb, paid_order, start_worker
):
    """The status is read on the row the worker's UPDATE locks, not on the snapshot
    its statement started from: the ship commits while that UPDATE waits for it."""
    order = paid_order(3600)
    key = request(servers, order, 1800)
    with Session(servers.engine) as db, db.begin():
        # As long as a worker takes to start: not cut short by the engine's 30 s.
        db.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        # holds the order's row until this commits
        transition(db, order, "ship")
        worker = start_worker(REFUND_LOCK_TIMEOUT_MS="600000")
        wait_until(lambda: lock_waiters(servers) == 1, what="the worker waiting for the row")
    wait_until(
        lambda: all_acked(rdb) and requests_of(servers, order)[0][2] != "requested",
        what="the worker to settle the request",
    )
    assert requests_of(servers, order) == [(key, 1800, "review", None)]
    assert refunds_of(servers, order) == (0, 0, "shipped") and reserved_of(servers, order) == 1800
    # printed after what the test waited on
    worker.wait_for("waits for review")


def test_requeueing_a_dead_letter_of_an_order_shipped_since_sends_it_to_review(
    servers, rdb, app, paid_order
):
    order = paid_order(1000)
    key = request(servers, order, 600)
    # as if the worker had given up on it
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE refund_requests SET status = 'failed', reason = 'x', published_at = now()")
        )
        conn.execute(text("UPDATE orders SET reserved_cents = 0"))
    ship(servers, order)
    letter_id = rdb.xadd(
        DEAD_LETTERS,
        {
            "request": str(request_id(servers, key)),
            "key": key,
            "order": str(order),
            "amount": "600",
            "reason": "failed 5 times: x",
        },
    )
    result = app.test_cli_runner().invoke(args=["refunds", "dead-letters", "--requeue", letter_id])
    assert result.exit_code == 0, result.output
    assert "waits for review" in result.output and "refunds approve" in result.output
    assert requests_of(servers, order) == [(key, 600, "review", None)]
    assert reserved_of(servers, order) == 600 and refunds_of(servers, order) == (0, 0, "shipped")
    assert rdb.xlen(DEAD_LETTERS) == 0
