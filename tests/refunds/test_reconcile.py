"""1,000 messages, a fifth of them duplicates, two workers: the books balance."""

from __future__ import annotations

import random

from sqlalchemy import text

from tests.refunds.conftest import all_acked, new_key, wait_until
from webapp.refunds.stream import RefundMessage, queue_refund


def test_thousand_messages_with_a_fifth_duplicated_reconcile_exactly(
        servers, rdb, app, paid_order, start_worker):
    rng = random.Random(8)
    refunds = [RefundMessage(new_key(), 0, rng.randint(1, 5000)) for _ in range(800)]
    # 100 orders, 8 refunds each; the first 10 are refunded in full.
    plan: dict[int, list[RefundMessage]] = {}
    for n in range(100):
        mine = refunds[n * 8:(n + 1) * 8]
        total = sum(r.amount_cents for r in mine)
        order = paid_order(total if n < 10 else total + 1000)
        plan[order] = [RefundMessage(r.key, order, r.amount_cents) for r in mine]
    messages = [r for mine in plan.values() for r in mine]
    messages += rng.sample(messages, 200)  # 200 of 1,000 are duplicates
    rng.shuffle(messages)
    for message in messages:
        queue_refund(rdb, message)

    # No claiming (nobody dies here): every message is delivered exactly once,
    # so each duplicate is turned away by the unique key, not by luck.
    workers = [start_worker(REFUND_CLAIM_IDLE_MS="600000") for _ in range(2)]
    wait_until(lambda: all_acked(rdb), timeout=90, what="1,000 messages acked")

    result = app.test_cli_runner().invoke(args=["reconcile-refunds"])
    print(result.output)  # shown with -s; quoted in the README
    expected = sum(r.amount_cents for mine in plan.values() for r in mine)
    assert result.exit_code == 0, result.output
    assert f"refund_records:        800 refunds, {expected} cents" in result.output
    assert f"orders.refunded_cents: {expected} cents over 100 orders" in result.output
    assert "0 pending, 0 dead-lettered" in result.output
    assert result.output.rstrip().endswith("MATCH")
    with servers.engine.connect() as conn:
        statuses = conn.execute(text("SELECT status, count(*) FROM orders GROUP BY status "
                                     "ORDER BY status")).all()
    assert statuses == [("paid", 90), ("refunded", 10)]
    logs = "".join(worker.output() for worker in workers)
    assert logs.count(" applied ") == 800 and logs.count("already applied") == 200


def test_reconciliation_reports_a_mismatch(servers, app, paid_order):
    order = paid_order(3600)
    with servers.engine.begin() as conn:  # refunded without a record: the books disagree
        conn.execute(text("UPDATE orders SET refunded_cents = 700 WHERE id = :id"),
                     {"id": order})
    result = app.test_cli_runner().invoke(args=["reconcile-refunds"])
    assert result.exit_code == 1
    assert f"order {order}: refunded_cents=700 records=0" in result.output
    assert result.output.rstrip().endswith("MISMATCH")
