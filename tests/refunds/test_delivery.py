"""At-least-once delivery, exactly-once effect: real worker processes on real
Redis and PostgreSQL, killed at the worst moments."""

from __future__ import annotations

from tests.refunds.conftest import all_acked, new_key, published, queue, refunds_of, wait_until
from webapp.refunds.stream import GROUP, STREAM


def test_same_message_delivered_three_times_refunds_once(servers, rdb, paid_order, start_worker):
    order = paid_order(3600)
    key = new_key()
    for _ in range(3):
        queue(servers, rdb, order, 1000, key)
    worker = start_worker()
    wait_until(lambda: all_acked(rdb), what="all three deliveries acked")
    assert refunds_of(servers, order) == (1, 1000, "paid")
    log = worker.output()
    assert log.count(" applied ") == 1 and log.count("already applied") == 2
    # the key is logged only as a short hash
    assert key not in log and key[:12] in log


def test_killed_after_commit_before_ack_is_redelivered_and_refunded_once(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(3600)
    message = queue(servers, rdb, order, 1000)
    first = start_worker(TEST_REFUND_PAUSE_BEFORE_ACK="600")
    first.wait_for(f"PAUSE before_ack {message}")
    first.kill()
    # committed...
    assert refunds_of(servers, order) == (1, 1000, "paid")
    # ...never acked
    assert rdb.xpending(STREAM, GROUP)["pending"] == 1

    # claims it once it has been idle REFUND_CLAIM_IDLE_MS
    second = start_worker()
    wait_until(lambda: all_acked(rdb), what="the redelivery to be acked")
    assert refunds_of(servers, order) == (1, 1000, "paid")
    # printed after what the test waited on
    second.wait_for(f"refund {message} key=")
    # printed after what the test waited on
    second.wait_for("already applied")


def test_killed_before_commit_is_redelivered_and_refunded_exactly_once(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(1000)
    message = queue(servers, rdb, order, 1000)
    first = start_worker(TEST_REFUND_PAUSE_BEFORE_COMMIT="600")
    # inserted and updated, not committed
    first.wait_for(f"PAUSE before_commit {message}")
    first.kill()
    assert refunds_of(servers, order) == (0, 0, "paid")

    second = start_worker()
    wait_until(lambda: all_acked(rdb), what="the redelivery to be acked")
    # refunded in full
    assert refunds_of(servers, order) == (1, 1000, "refunded")
    # printed after what the test waited on
    second.wait_for(" applied ")


def test_two_workers_racing_on_the_same_pending_messages_refund_each_once(
    servers, rdb, paid_order, start_worker
):
    # Two workers that claim anything pending at once (idle 0), each holding a
    # transaction open for a second: they both take every message.
    env = {"REFUND_CLAIM_IDLE_MS": "0", "TEST_REFUND_PAUSE_BEFORE_COMMIT": "1"}
    workers = [start_worker(**env), start_worker(**env)]
    for worker in workers:
        worker.wait_for("reading refunds")
    orders = [paid_order(3600) for _ in range(12)]
    refunds = [published(servers, order, 1000) for order in orders]
    # Appended and read by a consumer that then "dies", in one MULTI: the
    # workers never see them as new, only as pending messages to claim.
    with rdb.pipeline(transaction=True) as pipe:
        for refund in refunds:
            pipe.xadd(STREAM, refund.fields())
        pipe.xreadgroup(GROUP, "dead-consumer", {STREAM: ">"})
        pipe.execute()

    wait_until(lambda: all_acked(rdb), what="all claimed messages acked")
    for order in orders:
        assert refunds_of(servers, order) == (1, 1000, "paid")
    logs = "".join(worker.output() for worker in workers)
    assert logs.count(" applied ") == len(orders)
    # they did race on the same messages
    assert "already applied" in logs
