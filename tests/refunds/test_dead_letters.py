"""Refunds that can never apply, or keep failing, go to the dead-letter stream
with the reason, where an operator lists them."""

from __future__ import annotations

import re

from sqlalchemy import text

from tests.app.test_logs import json_lines
from tests.refunds.conftest import (
    all_acked,
    new_key,
    published,
    queue,
    refunds_of,
    request,
    requests_of,
    reserved_of,
    settled,
    wait_until,
)
from webapp.refunds.stream import DEAD_LETTERS, GROUP, STREAM


def dead_letters(rdb) -> list[dict[str, str]]:
    return [fields for _, fields in rdb.xrange(DEAD_LETTERS)]


def delivered(rdb) -> int:
    """How often the oldest pending message was delivered (0: none pending)."""
    pending = rdb.xpending_range(STREAM, GROUP, "-", "+", 1)
    return pending[0]["times_delivered"] if pending else 0


def test_refunds_that_cannot_apply_are_dead_lettered_with_the_reason(
    servers, rdb, app, paid_order, start_worker
):
    order = paid_order(1000)
    # its own message is never sent here
    real = published(servers, order, 600)
    # A copy of its message asking for more than was paid, one for an order that
    # does not exist, one that is not a refund at all.
    rdb.xadd(STREAM, {**real.fields(), "amount": "1001"})
    rdb.xadd(STREAM, {**real.fields(), "order": "999999"})
    rdb.xadd(STREAM, {"key": new_key(), "order": str(order), "amount": "lots"})
    start_worker()
    wait_until(lambda: all_acked(rdb) and rdb.xlen(DEAD_LETTERS) == 3, what="3 dead letters")
    reasons = sorted(letter["reason"] for letter in dead_letters(rdb))
    assert reasons == [
        "forged: it does not say what its refund request says",
        "forged: no such order, so no refund request",
        "order or amount missing or not a whole number",
    ]
    assert refunds_of(servers, order) == (0, 0, "paid")
    # Forged copies leave the real request alone: still requested, still reserved.
    assert [r[1:3] for r in requests_of(servers, order)] == [(600, "requested")]
    assert reserved_of(servers, order) == 600

    listing = app.test_cli_runner().invoke(args=["refunds", "dead-letters"])
    assert listing.exit_code == 0
    assert "reason: forged: no such order" in listing.output
    assert f"request={real.request_id} " in listing.output and "amount=1001" in listing.output


def test_a_refund_that_keeps_failing_is_dead_lettered_after_n_deliveries(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(1000)
    queue(servers, rdb, order, 500)
    # hold the order's row: every attempt times out
    with servers.engine.connect() as conn:
        conn.execute(text("SELECT 1 FROM orders WHERE id = :id FOR UPDATE"), {"id": order})
        start_worker(
            REFUND_LOCK_TIMEOUT_MS="50", REFUND_MAX_DELIVERIES="3", REFUND_CLAIM_IDLE_MS="100"
        ).wait_for("reading refunds")
        wait_until(lambda: delivered(rdb) > 3, what="more deliveries than allowed")
        # failing the request takes the order's row too
        conn.rollback()
    wait_until(lambda: rdb.xlen(DEAD_LETTERS) == 1 and all_acked(rdb), what="the dead letter")
    (letter,) = dead_letters(rdb)
    # At least 3: a give-up that met the lock too is one more failure.
    assert re.fullmatch(r"failed \d+ times: LockNotAvailable.*", letter["reason"], re.S)
    assert int(letter["deliveries"]) > 3 and letter["amount"] == "500"
    assert refunds_of(servers, order) == (0, 0, "paid") and reserved_of(servers, order) == 0


def test_a_dead_lettered_request_is_failed_on_the_order_page_then_requeued_and_applied(
    servers, rdb, app, client, paid_order, start_worker
):
    order = paid_order(1000)
    key = request(servers, order, 600)
    # hold the order's row: every attempt times out
    with servers.engine.connect() as conn:
        conn.execute(text("SELECT 1 FROM orders WHERE id = :id FOR UPDATE"), {"id": order})
        worker = start_worker(
            REFUND_LOCK_TIMEOUT_MS="50", REFUND_MAX_DELIVERIES="2", REFUND_CLAIM_IDLE_MS="100"
        )
        worker.wait_for("reading refunds")
        wait_until(lambda: delivered(rdb) > 2, what="more deliveries than allowed")
        # the cause is fixed; the worker gives up all the same
        conn.rollback()
    wait_until(lambda: rdb.xlen(DEAD_LETTERS) == 1 and all_acked(rdb), what="the dead letter")
    ((letter_id, letter),) = rdb.xrange(DEAD_LETTERS)
    # At least 2: a give-up that met the lock too is one more failure.
    assert letter["key"] == key
    assert re.fullmatch(r"failed \d+ times: LockNotAvailable.*", letter["reason"], re.S)
    ((_, amount, status, reason),) = requests_of(servers, order)
    assert (amount, status) == (600, "failed") and reason.startswith("we could not apply it")
    assert reserved_of(servers, order) == 0 and refunds_of(servers, order) == (0, 0, "paid")
    with servers.engine.connect() as conn:
        public_id = conn.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order})
    page = client.get(f"/orders/{public_id}").text
    assert "<strong>not refunded</strong> — we could not apply it after several attempts" in page

    cli = app.test_cli_runner()
    requeued = cli.invoke(args=["refunds", "dead-letters", "--requeue", letter_id, "--by", "ada"])
    assert requeued.exit_code == 0, requeued.output
    assert "Requeued: €6.00 for order" in requeued.output
    # who requeued it, in its row and its log line
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT requeued_by FROM refund_requests")) == "ada"
    assert [
        (line["operator"], line["dead_letter"])
        for line in json_lines(requeued.stderr)
        if line.get("action") == "requeue-refund"
    ] == [("ada", letter_id)]
    assert rdb.xlen(DEAD_LETTERS) == 0
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the requeued request applied")
    assert requests_of(servers, order) == [(key, 600, "applied", None)]
    assert reserved_of(servers, order) == 0 and refunds_of(servers, order) == (1, 600, "paid")
    # printed after what the test waited on
    worker.wait_for(" applied ")
    again = cli.invoke(args=["refunds", "dead-letters", "--requeue", letter_id])
    assert again.exit_code == 1 and "No dead letter has the id" in again.output


def test_requeue_is_refused_when_the_amount_is_no_longer_left(servers, rdb, app, paid_order):
    order = paid_order(1000)
    key = request(servers, order, 600)
    # as if the worker had given up on it
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE refund_requests SET status = 'failed', reason = 'x'"))
        conn.execute(text("UPDATE orders SET reserved_cents = 0"))
    # since then, another request took most of what is left
    request(servers, order, 700)
    letter_id = rdb.xadd(
        DEAD_LETTERS,
        {"key": key, "order": str(order), "amount": "600", "reason": "failed 5 times: x"},
    )
    result = app.test_cli_runner().invoke(args=["refunds", "dead-letters", "--requeue", letter_id])
    assert result.exit_code == 1
    assert (
        f"Not requeued: order {order} has 300 cents left to refund, less than the 600"
        in result.output
    )
    assert rdb.xlen(DEAD_LETTERS) == 1 and reserved_of(servers, order) == 700
    assert [r[2] for r in requests_of(servers, order)] == ["failed", "requested"]
    bad = app.test_cli_runner().invoke(args=["refunds", "dead-letters", "--requeue", "nonsense"])
    assert bad.exit_code == 1 and "Error" in bad.output
