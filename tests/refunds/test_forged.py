"""The database decides every refund: a stream message applies only what a
refund_requests row says. Anyone who can write to Redis can append a message;
one with no request behind it is dead-lettered as forged, never applied."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.refunds.conftest import (
    all_acked,
    new_key,
    refunds_of,
    request,
    requests_of,
    reserved_of,
    settled,
    wait_until,
)
from webapp.refunds.stream import DEAD_LETTERS, STREAM

# in scripts/test --quick
pytestmark = pytest.mark.quick


def public_id_of(servers, order_id: int) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order_id})


def request_id_of(servers, key: str) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT id FROM refund_requests WHERE idempotency_key = :k"), {"k": key}
        )


@pytest.mark.parametrize("names", ["nothing", "a real request with another key"])
def test_a_refund_message_nobody_requested_is_dead_lettered_as_forged_and_never_applied(
    servers, rdb, paid_order, start_worker, names
):
    """The forgery: XADD refunds * key <random> order <id> amount <total>
    public_id ''. Order ids are sequential, so any paid order can be named."""
    victim = paid_order(3600)
    forged = {"key": new_key(), "order": str(victim), "amount": "3600", "public_id": ""}
    # the id of a request made on another order, which is real
    if names != "nothing":
        other = paid_order(3600)
        forged["request"] = str(request_id_of(servers, request(servers, other, 100)))
        # a leaked key, copied along
        forged["public_id"] = public_id_of(servers, victim)
    message_id = rdb.xadd(STREAM, forged)

    worker = start_worker()
    wait_until(lambda: all_acked(rdb) and settled(servers), what="the forged message acked")
    assert refunds_of(servers, victim) == (0, 0, "paid")
    assert reserved_of(servers, victim) == 0 and requests_of(servers, victim) == []
    # appended before the ack
    ((_, letter),) = rdb.xrange(DEAD_LETTERS)
    assert letter["message_id"] == message_id and letter["reason"].startswith("forged")
    # A dead letter keeps what names the request, never the order's private key.
    assert public_id_of(servers, victim) not in letter.values() and "public_id" not in letter
    log = worker.wait_for(f"refund {message_id} forged")
    assert "WARNING" in log.split(f"refund {message_id} forged")[0].splitlines()[-1]
    # names the message, not what it carried
    assert forged["key"] not in log


def test_a_published_message_carries_the_request_id_not_the_order_key(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(3600)
    key = request(servers, order, 1000)
    worker = start_worker(TEST_REFUND_PAUSE_BEFORE_MARK="600")
    # published, and held there: the entry is still in
    worker.wait_for("PAUSE before_mark")
    ((_, fields),) = rdb.xrange(STREAM)
    assert fields["request"] == str(request_id_of(servers, key))
    assert public_id_of(servers, order) not in fields.values() and "public_id" not in fields


def test_reconcile_flags_a_refund_applied_with_no_request_or_payment_event_behind_it(
    servers, app, paid_order
):
    """What the old worker did with the forged message: a record and the order's
    refunded_cents moved together, so every total agreed and reconcile said MATCH."""
    order = paid_order(3600)
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO refund_records (idempotency_key, order_id, amount_cents, "
                "message_id) VALUES (:k, :o, 3600, '1700000000000-0')"
            ),
            {"k": new_key(), "o": order},
        )
        conn.execute(
            text("UPDATE orders SET refunded_cents = 3600, status = 'refunded' WHERE id = :o"),
            {"o": order},
        )
    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    assert result.exit_code == 1, result.output
    assert "applied, unbacked:     1" in result.output
    assert f"order {order}: 3600 cents by message 1700000000000-0" in result.output
    assert result.output.rstrip().endswith("MISMATCH")


def test_dead_letters_are_capped(servers, rdb, start_worker):
    """500 messages that can never apply, with the cap at 100: the oldest letters go
    (MAXLEN ~ keeps whole stream nodes of 100 entries, so up to 199 remain)."""
    with rdb.pipeline(transaction=False) as pipe:
        for n in range(500):
            pipe.xadd(STREAM, {"key": new_key(), "order": str(n + 1), "amount": "lots"})
        message_ids = pipe.execute()
    start_worker(REFUND_DEAD_LETTERS_MAX="100", REFUND_BATCH="100")
    wait_until(lambda: all_acked(rdb), what="500 messages dead-lettered")
    assert 100 <= rdb.xlen(DEAD_LETTERS) < 200
    kept = {letter["message_id"] for _, letter in rdb.xrange(DEAD_LETTERS)}
    # the newest stay
    assert message_ids[-1] in kept and message_ids[0] not in kept
