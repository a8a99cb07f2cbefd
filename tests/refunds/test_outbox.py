"""Refund requests through the outbox: a request is a row the submit commits,
the relay in the worker publishes it, the worker applies it once and moves its
reservation to refunded. Real worker processes, killed at the worst moments."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from tests.refunds.conftest import (
    all_acked,
    pending_count,
    refunds_of,
    request,
    requests_of,
    reserved_of,
    settled,
    wait_until,
)
from webapp.refunds.stream import GROUP, STREAM


def test_a_request_is_published_by_the_relay_and_applied_once(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(3600)
    key = request(servers, order, 1000)
    # nothing in Redis until a relay runs
    assert rdb.exists(STREAM) == 0
    worker = start_worker()
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the request applied")
    assert refunds_of(servers, order) == (1, 1000, "paid")
    assert requests_of(servers, order) == [(key, 1000, "applied", None)]
    assert reserved_of(servers, order) == 0
    # printed after what the test waited on
    worker.wait_for("relay published 1 refund requests")


def test_relay_killed_between_xadd_and_its_mark_publishes_twice_and_refunds_once(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(3600)
    key = request(servers, order, 1000)
    first = start_worker(TEST_REFUND_PAUSE_BEFORE_MARK="600")
    first.wait_for("PAUSE before_mark")
    # Its consumer has read the copy too (and waits for the relay's row lock).
    wait_until(lambda: pending_count(rdb) == 1, what="the first copy delivered")
    # XADDed; the mark (published_at) never committed
    first.kill()
    assert [fields["key"] for _, fields in rdb.xrange(STREAM)] == [key]
    with servers.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT published_at FROM refund_requests").scalar() is None
    assert refunds_of(servers, order) == (0, 0, "paid")

    # Once the killed relay's row lock is gone, the next worker's relay publishes the
    # row again. A lock, not a window, puts that first: the test holds the order's row,
    # so the new consumer, which claims the first copy at once (claim idle 0), waits at
    # its INSERT (the foreign key's check) until the relay has published. Applied
    # first, the request would not have been published again.
    wait_until(lambda: row_unlocked(servers), what="the killed relay's lock released")
    with servers.engine.connect() as hold:
        # As long as a worker takes to start: not cut short by the engine's 30 s.
        hold.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        hold.execute(text("SELECT 1 FROM orders WHERE id = :id FOR UPDATE"), {"id": order})
        second = start_worker(
            REFUND_CLAIM_IDLE_MS="0",
            REFUND_LOCK_TIMEOUT_MS="600000",
            REFUND_MAX_DELIVERIES="1000",
            # a statement timeout is retried
        )
        wait_until(
            lambda: rdb.xlen(STREAM) == 2 and published(servers), what="the row published again"
        )
        hold.rollback()
    wait_until(
        lambda: settled(servers) and all_acked(rdb) and "already applied" in second.output(),
        what="both copies settled",
    )
    assert refunds_of(servers, order) == (1, 1000, "paid")
    assert requests_of(servers, order) == [(key, 1000, "applied", None)]
    assert reserved_of(servers, order) == 0
    log = second.output()
    assert "relay published 1 refund requests" in log
    assert log.count(" applied ") == 1 and log.count("already applied") == 1


def published(servers) -> bool:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT published_at IS NOT NULL FROM refund_requests"))


def row_unlocked(servers) -> bool:
    with servers.engine.connect() as conn:
        try:
            conn.execute(text("SELECT 1 FROM refund_requests FOR UPDATE NOWAIT"))
        # LockNotAvailable
        except OperationalError:
            return False
    return True


@pytest.mark.parametrize(("where", "committed"), [("before_commit", 0), ("before_ack", 1)])
def test_worker_killed_before_or_after_commit_refunds_once_and_moves_the_reservation(
    servers, rdb, paid_order, start_worker, where, committed
):
    order = paid_order(1000)
    key = request(servers, order, 1000)
    first = start_worker(**{f"TEST_REFUND_PAUSE_{where.upper()}": "600"})
    first.wait_for(f"PAUSE {where}")
    first.kill()
    # Before COMMIT nothing moved; after it, refunded and released together.
    assert refunds_of(servers, order) == (
        committed,
        1000 * committed,
        "refunded" if committed else "paid",
    )
    assert reserved_of(servers, order) == 1000 * (1 - committed)
    assert rdb.xpending(STREAM, GROUP)["pending"] == 1

    start_worker()
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the redelivery settled")
    assert refunds_of(servers, order) == (1, 1000, "refunded")
    assert requests_of(servers, order) == [(key, 1000, "applied", None)]
    assert reserved_of(servers, order) == 0


def test_two_pages_for_everything_left_then_the_worker_refunds_exactly_once(
    client, servers, rdb, paid_order, start_worker
):
    from tests.refunds.test_refund_form import open_refund_form, refund

    order = paid_order(3600)
    with servers.engine.connect() as conn:
        public_id = conn.exec_driver_sql(
            f"SELECT public_id FROM orders WHERE id = {order}"
        ).scalar()
    tabs = [open_refund_form(client, public_id) for _ in range(2)]
    responses = [refund(client, public_id, tab, "36.00") for tab in tabs]
    assert [r.status_code for r in responses] == [303, 422]
    assert 'value="36.00"' in responses[1].text

    start_worker()
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the request applied")
    assert refunds_of(servers, order) == (1, 3600, "refunded")
    assert [r[1:3] for r in requests_of(servers, order)] == [(3600, "applied")]
    page = client.get(f"/orders/{public_id}").text
    assert "<strong>refunded</strong>" in page and "All of it was refunded to you." in page
