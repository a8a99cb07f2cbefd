"""Refunds that can never apply, or keep failing, go to the dead-letter stream
with the reason, where an operator lists them."""

from __future__ import annotations

from sqlalchemy import text

from tests.refunds.conftest import all_acked, new_key, queue, refunds_of, wait_until
from webapp.refunds.stream import DEAD_LETTERS, STREAM


def dead_letters(rdb) -> list[dict[str, str]]:
    return [fields for _, fields in rdb.xrange(DEAD_LETTERS)]


def test_refunds_that_cannot_apply_are_dead_lettered_with_the_reason(
        servers, rdb, app, paid_order, start_worker):
    order = paid_order(1000)
    queue(rdb, new_key(), order, 1001)
    queue(rdb, new_key(), 999_999, 100)
    rdb.xadd(STREAM, {"key": new_key(), "order": str(order), "amount": "lots"})
    start_worker()
    wait_until(lambda: all_acked(rdb) and rdb.xlen(DEAD_LETTERS) == 3, what="3 dead letters")
    reasons = sorted(letter["reason"] for letter in dead_letters(rdb))
    assert reasons == ["no such order", "order or amount missing or not a whole number",
                       "the amount is more than is left to refund"]
    assert refunds_of(servers, order) == (0, 0, "paid")

    listing = app.test_cli_runner().invoke(args=["refund-dead-letters"])
    assert listing.exit_code == 0
    assert "reason: no such order" in listing.output and "amount=1001" in listing.output


def test_a_refund_that_keeps_failing_is_dead_lettered_after_n_deliveries(
        servers, rdb, paid_order, start_worker):
    order = paid_order(1000)
    with servers.engine.connect() as conn:  # hold the order's row: every attempt times out
        conn.execute(text("SELECT 1 FROM orders WHERE id = :id FOR UPDATE"), {"id": order})
        queue(rdb, new_key(), order, 500)
        start_worker(REFUND_LOCK_TIMEOUT_MS="50", REFUND_MAX_DELIVERIES="3",
                     REFUND_CLAIM_IDLE_MS="100")
        wait_until(lambda: rdb.xlen(DEAD_LETTERS) == 1, what="the dead letter")
        conn.rollback()
    (letter,) = dead_letters(rdb)
    assert letter["reason"].startswith("failed 3 times: LockNotAvailable")
    assert letter["deliveries"] == "4" and letter["amount"] == "500"
    assert all_acked(rdb) and refunds_of(servers, order) == (0, 0, "paid")
