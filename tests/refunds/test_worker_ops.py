"""What an operator sees of a real worker: JSON log lines that name orders by number,
a health check, and Prometheus metrics (processed, applied, dead-lettered, lag)."""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from dev.embedded import free_port
from tests.app.test_logs import assert_shape, json_lines
from tests.refunds.conftest import all_acked, queue, wait_until
from webapp.refunds.stream import STREAM


def test_the_workers_lines_are_json_and_name_the_message_and_the_order_by_number(
    servers, rdb, paid_order, start_worker
):
    order = paid_order(3600)
    with servers.engine.connect() as conn:
        number, key = conn.execute(
            text("SELECT order_number, public_id FROM orders WHERE id = :id"), {"id": order}
        ).one()
    applied = queue(servers, rdb, order, 1000)
    forged = rdb.xadd(STREAM, {"key": "k" * 43, "order": str(order), "amount": "3600"})
    worker = start_worker()
    wait_until(lambda: all_acked(rdb), what="both messages settled")

    # whole lines only: the worker may be mid-line
    def warnings_written() -> int:
        written = worker.output().rpartition("\n")[0]
        return sum('"level":"WARNING"' in line for line in written.splitlines())

    # Two: "forged ... dead-lettered", then the dead letter's own line, a moment later.
    wait_until(lambda: warnings_written() == 2, what="the forged message's two warnings")
    lines = json_lines(worker.output())
    for line in lines:
        assert_shape(line)
    assert {line["logger"] for line in lines} <= {"webapp.refunds.worker", "webapp.refunds.relay"}
    (done,) = [line for line in lines if line.get("outcome") == "applied"]
    assert done["level"] == "INFO" and done["request_id"] == applied
    assert done["order_number"] == number and f"order={number}" in done["message"]
    # the number, not the internal id
    assert f"order={order} " not in done["message"]
    warnings = [line for line in lines if line["level"] == "WARNING"]
    assert {line["request_id"] for line in warnings} == {forged}
    # forged, buried
    assert [line["order_number"] for line in warnings] == [number, number]
    assert "forged" in warnings[0]["message"]
    assert key not in worker.output() and "k" * 43 not in worker.output()
    started = [line for line in lines if "reading refunds" in line["message"]]
    # not about a message
    assert started and started[0]["request_id"] is None


def scrape(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers), timeout=10
        ) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metric(page: str, name: str) -> float:
    return next(
        sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == name
    )


def test_the_worker_serves_health_and_metrics_processed_applied_dead_lettered_and_lag(
    servers, rdb, paid_order, start_worker, tmp_path
):
    order = paid_order(3600)
    applied = queue(servers, rdb, order, 1000)
    # forged
    rdb.xadd(STREAM, {"key": "k" * 43, "order": str(order), "amount": "3600"})
    port, token = free_port(), "m" * 32
    # held before its ack until the test has looked
    release = tmp_path / "release"
    worker = start_worker(
        REFUND_MONITOR_BIND=str(port),
        METRICS_TOKEN=token,
        TEST_REFUND_PAUSE_BEFORE_ACK="600",
        TEST_REFUND_RELEASE=str(release),
    )
    worker.wait_for(f"PAUSE before_ack {applied}")
    assert f"serving /healthz and /metrics on 127.0.0.1:{port}" in worker.output()
    status, body = scrape(port, "/healthz")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok"
    assert {name: check["status"] for name, check in health["checks"].items()} == {
        "redis": "up",
        "postgres": "up",
    }
    # METRICS_TOKEN guards it, as the app's
    assert scrape(port, "/metrics")[0] == 401
    assert scrape(port, "/metrics", "wrong")[0] == 401
    # committed, held before its ack
    status, held = scrape(port, "/metrics", token)
    assert status == 200
    assert metric(held, "refund_worker_applied_total") == 1
    assert metric(held, "refund_worker_dead_lettered_total") == 1
    assert metric(held, "refund_worker_lag_messages") == 1
    assert metric(held, "refund_worker_lag_seconds") > 0
    release.touch()
    wait_until(lambda: all_acked(rdb), what="the held refund to be acked")
    wait_until(
        lambda: metric(scrape(port, "/metrics", token)[1], "refund_worker_processed_total") == 2,
        what="both processed",
    )
    after = scrape(port, "/metrics", token)[1]
    assert metric(after, "refund_worker_lag_messages") == 0
    assert metric(after, "refund_worker_lag_seconds") == 0
    assert scrape(port, "/nothing")[0] == 404
    assert worker.stop() == 0


def served(port: int, path: str, token: str | None = None) -> tuple[int, str] | None:
    """``scrape``, or None while the monitor is not listening yet."""
    try:
        return scrape(port, path, token)
    # connection refused: the server is starting
    except urllib.error.URLError:
        return None


def test_in_production_the_workers_metrics_need_metrics_token(servers, start_worker):
    port = free_port()
    worker = start_worker(APP_ENV="production", REFUND_MONITOR_BIND=str(port))
    log = worker.wait_for("reading refunds")
    assert "/metrics off: METRICS_TOKEN is unset in production" in log
    assert wait_until(lambda: served(port, "/healthz"), what="the monitor")[0] == 200
    # as the app's: no open door
    assert scrape(port, "/metrics") == (404, "not found\n")

    token = secrets.token_hex(32)
    strong = start_worker(
        APP_ENV="production", REFUND_MONITOR_BIND=str(port := free_port()), METRICS_TOKEN=token
    )
    assert "serving /healthz and /metrics" in strong.wait_for("reading refunds")
    assert wait_until(lambda: served(port, "/metrics"), what="the monitor")[0] == 401
    assert scrape(port, "/metrics", token)[0] == 200


def test_without_refund_monitor_bind_the_worker_serves_nothing(servers, rdb, start_worker):
    worker = start_worker()
    log = worker.wait_for("reading refunds")
    assert "serving /healthz" not in log
