"""The refund worker through redis+sentinel://: it asks the Sentinel for the
master, as the app does, and the stream lands there."""

from __future__ import annotations

from tests.deploy.test_sentinel import sentinel_url  # noqa: F401 - the fixture
from tests.refunds.conftest import all_acked, refunds_of, request, settled, wait_until
from webapp.refunds.stream import STREAM


def test_the_worker_finds_the_master_through_sentinel_and_refunds_once(
    servers,
    rdb,
    sentinel_url,  # noqa: F811
    paid_order,
    start_worker,
):
    order = paid_order(3600)
    request(servers, order, 1000)
    worker = start_worker(REDIS_URL=sentinel_url)
    wait_until(
        lambda: settled(servers) and rdb.exists(STREAM) and all_acked(rdb),
        what="the request applied through the master the Sentinel named",
    )
    assert refunds_of(servers, order) == (1, 1000, "paid")
    # printed after what the test waited on
    worker.wait_for("relay published 1 refund requests")
