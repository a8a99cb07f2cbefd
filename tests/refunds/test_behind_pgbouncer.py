"""The refund worker behind PgBouncer pooling by transaction (DATABASE_POOLER=transaction):
it applies refunds through it, and its relay LISTENs where a session lasts
(DATABASE_LISTEN_URL, straight to PostgreSQL) or, without one, polls."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from tests.refunds.conftest import (
    all_acked,
    new_key,
    request_refund_keyed,
    requests_of,
    settled,
    wait_until,
)
from webapp.db import make_engine


@pytest.fixture
def pooled_engine(pgbouncer):
    """The web app's engine behind PgBouncer, where refund requests are made."""
    engine = make_engine(pgbouncer.url("webapp_test"), "transaction")
    yield engine
    engine.dispose()


def request_through(engine, order_id: int, cents: int) -> str:
    """A refund request as the refund form's submit makes it (its NOTIFY included)."""
    key = new_key()
    with Session(engine) as db, db.begin():
        request_refund_keyed(db, order_id, cents, key)
    return key


def test_the_relay_listens_straight_to_postgresql_and_wakes_on_each_request(
    servers, rdb, pgbouncer, pooled_engine, paid_order, start_worker
):
    order = paid_order(3600)
    # An hour between polls: within this test only a NOTIFY wakes the relay.
    worker = start_worker(
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
        DATABASE_LISTEN_URL=servers.database_url,
        REFUND_RELAY_POLL_SECONDS="3600",
    )
    worker.wait_for(" as group ")
    first = request_through(pooled_engine, order, 1000)
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the first request applied")
    # The relay has published the first and waits: the second can only wake it by NOTIFY.
    second = request_through(pooled_engine, order, 500)
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the second request applied")
    assert requests_of(servers, order) == [
        (first, 1000, "applied", None),
        (second, 500, "applied", None),
    ]
    assert "relay polls" not in worker.output()


def test_without_a_listen_url_the_relay_polls_and_says_so(
    servers, rdb, pgbouncer, pooled_engine, paid_order, start_worker
):
    order = paid_order(3600)
    worker = start_worker(
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
        REFUND_RELAY_POLL_SECONDS="0.2",
    )
    worker.wait_for("relay polls every 0.2 s")
    key = request_through(pooled_engine, order, 1000)
    wait_until(lambda: settled(servers) and all_acked(rdb), what="the request applied")
    assert requests_of(servers, order) == [(key, 1000, "applied", None)]
    assert "DATABASE_LISTEN_URL is not set" in worker.output()


def test_a_worker_told_nothing_of_pgbouncer_does_not_start_and_names_the_setting(
    servers, pgbouncer, start_worker
):
    worker = start_worker(DATABASE_URL=pgbouncer.url("webapp_test"))
    assert worker.process.wait(60) == 2
    assert "refund worker not started" in worker.output()
    assert "set DATABASE_POOLER=transaction" in worker.output()
