"""Two workers, many refunds: the books balance, reservations included, and
the stream stays short."""

from __future__ import annotations

import os
import random
import threading

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from tests.refunds.conftest import (
    all_acked,
    new_key,
    published,
    request_refund_keyed,
    settled,
    wait_until,
)
from webapp.refunds.requests import NotEnoughLeft
from webapp.refunds.stream import STREAM, RefundMessage, queue_refund

STREAM_MAX, BATCH = 300, 50
LONG_RUN = pytest.mark.skipif(
    not os.environ.get("REFUNDS_LONG_RUN"),
    reason="the long form: REFUNDS_LONG_RUN=1 (about 2 minutes)",
)


@pytest.mark.parametrize(
    "refunds", [1000, pytest.param(10_000, marks=[LONG_RUN, pytest.mark.timeout(900)])]
)
def test_refund_requests_through_two_workers_reconcile_with_reservations_and_a_short_stream(
    servers, rdb, app, paid_order, start_worker, refunds
):
    """Requests made while two workers (each with its relay) run; ten per order,
    the first tenth of the orders refunded in full, and one request per order
    over what is left, refused at once. Reconciled mid-run (some pending) and at
    the end; the stream's length is sampled throughout."""
    rng = random.Random(13)
    workers = [
        start_worker(REFUND_STREAM_MAX=str(STREAM_MAX), REFUND_BATCH=str(BATCH)) for _ in range(2)
    ]
    for worker in workers:
        worker.wait_for("reading refunds")
    lengths: list[int] = []
    done = threading.Event()
    sampler = threading.Thread(
        target=lambda: [
            (lengths.append(rdb.xlen(STREAM)), done.wait(0.02)) for _ in iter(done.is_set, True)
        ]
    )
    sampler.start()
    expected = refused = 0
    mid_run = None
    try:
        for n in range(refunds // 10):
            amounts = [rng.randint(1, 5000) for _ in range(10)]
            order = paid_order(sum(amounts) + (0 if n < refunds // 100 else 1000))
            with Session(servers.engine) as db, db.begin():
                for amount in amounts:
                    request_refund_keyed(db, order, amount, new_key())
            try:
                with Session(servers.engine) as db, db.begin():
                    request_refund_keyed(db, order, 1001, new_key())
            except NotEnoughLeft:
                refused += 1
            expected += sum(amounts)
            # halfway, while refunds flow: the books balance all the same
            if n == refunds // 20:
                mid_run = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
        wait_until(
            lambda: settled(servers) and all_acked(rdb),
            timeout=60 + refunds / 20,
            what=f"{refunds} refunds applied",
        )
        wait_until(lambda: rdb.xlen(STREAM) <= 1, what="the trimmer to catch up")
    finally:
        done.set()
        sampler.join()
    assert refused == refunds // 10
    print(mid_run.output)
    # usually with some pending, if not always
    assert mid_run.exit_code == 0, mid_run.output

    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    # shown with -s
    print(result.output)
    print(
        f"stream length: at most {max(lengths)} over {len(lengths)} samples, "
        f"{rdb.xlen(STREAM)} at the end (REFUND_STREAM_MAX={STREAM_MAX})"
    )
    assert result.exit_code == 0, result.output
    assert (
        f"refund_requests:       {refunds} requested ({expected} cents) = {refunds} applied "
        f"({expected}) + 0 pending (0) + 0 failed (0)"
    ) in result.output
    assert f"orders.refunded_cents: {expected} cents over {refunds // 10} orders" in result.output
    assert "orders.reserved_cents: 0 cents" in result.output
    assert result.output.rstrip().endswith("MATCH")
    # Two relays may each add one batch after reading the length under the limit.
    assert max(lengths) <= STREAM_MAX + 2 * BATCH
    with servers.engine.connect() as conn:
        statuses = conn.execute(
            text("SELECT status, count(*) FROM orders GROUP BY status ORDER BY status")
        ).all()
    assert statuses == [("paid", refunds // 10 - refunds // 100), ("refunded", refunds // 100)]
    # Each worker logs an outcome just after its XACK: wait for the last line.
    wait_until(
        lambda: "".join(w.output() for w in workers).count(" applied ") == refunds,
        what=f"{refunds} 'applied' log lines",
    )


def test_thousand_messages_with_a_fifth_duplicated_reconcile_exactly(
    servers, rdb, app, paid_order, start_worker
):
    rng = random.Random(8)
    amounts = [rng.randint(1, 5000) for _ in range(800)]
    # 100 orders, 8 refunds each (published requests); the first 10 are refunded in full.
    plan: dict[int, list[RefundMessage]] = {}
    for n in range(100):
        mine = amounts[n * 8 : (n + 1) * 8]
        order = paid_order(sum(mine) if n < 10 else sum(mine) + 1000)
        plan[order] = [published(servers, order, amount) for amount in mine]
    messages = [r for mine in plan.values() for r in mine]
    # 200 of 1,000 are duplicates
    messages += rng.sample(messages, 200)
    rng.shuffle(messages)
    for message in messages:
        queue_refund(rdb, message)

    # No claiming (nobody dies here): every message is delivered exactly once,
    # so each duplicate is turned away by the unique key, not by luck.
    workers = [start_worker(REFUND_CLAIM_IDLE_MS="600000") for _ in range(2)]
    wait_until(lambda: all_acked(rdb), timeout=90, what="1,000 messages acked")

    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    # shown with -s; quoted in the README
    print(result.output)
    expected = sum(r.amount_cents for mine in plan.values() for r in mine)
    assert result.exit_code == 0, result.output
    assert f"refund_records:        800 refunds, {expected} cents" in result.output
    assert f"orders.refunded_cents: {expected} cents over 100 orders" in result.output
    assert "0 pending, 0 dead-lettered" in result.output
    assert result.output.rstrip().endswith("MATCH")
    with servers.engine.connect() as conn:
        statuses = conn.execute(
            text("SELECT status, count(*) FROM orders GROUP BY status ORDER BY status")
        ).all()
    assert statuses == [("paid", 90), ("refunded", 10)]
    logs = "".join(worker.output() for worker in workers)
    assert logs.count(" applied ") == 800 and logs.count("already applied") == 200


def test_reconciliation_reports_a_mismatch(servers, app, paid_order):
    order = paid_order(3600)
    # refunded without a record: the books disagree
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET refunded_cents = 700 WHERE id = :id"), {"id": order})
    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    assert result.exit_code == 1
    assert f"order {order}: refunded_cents=700 records=0" in result.output
    assert result.output.rstrip().endswith("MISMATCH")
