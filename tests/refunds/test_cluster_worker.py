"""The refund worker (consumer, relay, trimmer, dead letters) on the 3-node Redis
Cluster of tests/deploy/test_cluster.py, through the same redis+cluster:// URL as the app."""

from __future__ import annotations

from sqlalchemy import text

from tests.deploy.test_cluster import cluster, cluster_url  # noqa: F401 - the fixtures
from tests.refunds.conftest import all_acked, new_key, refunds_of, requests_of, settled, wait_until
from tests.refunds.test_refund_form import open_refund_form, refund
from webapp.redis_urls import make_client
from webapp.refunds.stream import DEAD_LETTERS, STREAM


def test_the_worker_on_a_cluster_publishes_applies_dead_letters_and_trims(
    make_app,
    servers,
    cluster_url,  # noqa: F811
    paid_order,
    start_worker,
):
    rdb = make_client(cluster_url)
    # The stream and its dead letters live in different slots: a MULTI over both
    # would be refused (CROSSSLOT); the worker uses none.
    assert rdb.keyslot(STREAM) != rdb.keyslot(DEAD_LETTERS)
    app = make_app(REDIS_URL=cluster_url)
    client = app.test_client()
    order = paid_order(3600)
    with servers.engine.connect() as conn:
        public_id = conn.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order})
    assert (
        refund(client, public_id, open_refund_form(client, public_id), "12.50").status_code == 303
    )
    malformed = rdb.xadd(STREAM, {"key": new_key(), "order": str(order), "amount": "lots"})

    worker = start_worker(REDIS_URL=cluster_url)
    # At least one dead letter: a reply lost between its XADD and the XACK (a
    # timeout on a loaded machine) buries the message twice, by design.
    try:
        wait_until(
            lambda: settled(servers) and rdb.xlen(DEAD_LETTERS) >= 1 and all_acked(rdb),
            what="the request applied and the malformed message dead-lettered",
        )
    except AssertionError:
        print(worker.output())
        raise
    assert {fields["message_id"] for _, fields in rdb.xrange(DEAD_LETTERS)} == {malformed}
    assert refunds_of(servers, order) == (1, 1250, "paid")
    assert [r[1:3] for r in requests_of(servers, order)] == [(1250, "applied")]
    wait_until(lambda: rdb.xlen(STREAM) <= 1, what="the stream trimmed")
    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    assert result.exit_code == 0 and result.output.rstrip().endswith("MATCH"), result.output
    assert "0 pending, " in result.output
    # printed after what the test waited on
    worker.wait_for("relay published 1 refund requests")
    assert "<strong>refunded</strong>" in client.get(f"/orders/{public_id}").text
    rdb.close()
