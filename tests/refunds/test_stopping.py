"""SIGTERM: stop reading, finish or abandon what is in flight, never undo a commit."""

from __future__ import annotations

import pytest

from tests.refunds.conftest import all_acked, queue, refunds_of, wait_until
from webapp.refunds.stream import GROUP, STREAM


def test_sigterm_lets_the_refund_in_flight_finish(servers, rdb, paid_order, start_worker):
    order = paid_order(3600)
    message = queue(servers, rdb, order, 1000)
    worker = start_worker(TEST_REFUND_PAUSE_BEFORE_COMMIT="2", REFUND_GRACE_SECONDS="60")
    worker.wait_for(f"PAUSE before_commit {message}")
    assert worker.stop() == 0
    assert refunds_of(servers, order) == (1, 1000, "paid")
    assert all_acked(rdb)
    assert "stopped" in worker.output() and "abandoning" not in worker.output()


@pytest.mark.parametrize(("where", "committed"), [("before_commit", 0), ("before_ack", 1)])
def test_sigterm_past_the_grace_period_abandons_without_undoing_anything(
    servers, rdb, paid_order, start_worker, where, committed
):
    order = paid_order(3600)
    message = queue(servers, rdb, order, 1000)
    stuck = start_worker(
        **{f"TEST_REFUND_PAUSE_{where.upper()}": "600", "REFUND_GRACE_SECONDS": "0.5"}
    )
    stuck.wait_for(f"PAUSE {where} {message}")
    # the CancelledError ended the refund, not the process badly
    assert stuck.stop() == 0
    assert "abandoning 1 refunds in flight" in stuck.output()
    # Cancelled before COMMIT: rolled back. After COMMIT: kept, merely not acked.
    assert refunds_of(servers, order) == (committed, 1000 * committed, "paid")
    assert rdb.xpending(STREAM, GROUP)["pending"] == 1

    start_worker()
    wait_until(lambda: all_acked(rdb), what="the abandoned refund to be redelivered")
    assert refunds_of(servers, order) == (1, 1000, "paid")
