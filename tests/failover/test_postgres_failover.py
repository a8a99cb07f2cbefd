"""PostgreSQL fails over under load: the primary is SIGKILLed, the standby promoted.

Two gunicorn instances reach PostgreSQL through one multi-host DATABASE_URL
(``host=primary&host=standby&target_session_attrs=read-write``); nobody
restarts them. Synchronous replication must lose no order a customer was sent
to; asynchronous replication with the standby behind shows what it loses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.failover.conftest import soak_seconds
from tests.failover.servers import ReplicatedPostgres
from tests.failover.soak import Load, Verdict, judge
from tests.live import LiveServer, request
from webapp.db import make_engine, seed, upgrade

DATABASE = "webapp"
PROMOTE_AFTER = 0.6  # seconds from the crash to pg_ctl promote (a quick failover manager)


def replicated(base: Path, *, synchronous: bool) -> Iterator[ReplicatedPostgres]:
    pair = ReplicatedPostgres(base, synchronous=synchronous)
    try:
        pair.start(DATABASE)
        engine = make_engine(pair.primary.url(DATABASE))
        upgrade(engine)
        seed(engine)
        engine.dispose()
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def synchronous_pair(tmp_path: Path) -> Iterator[ReplicatedPostgres]:
    yield from replicated(tmp_path, synchronous=True)


@pytest.fixture
def asynchronous_pair(tmp_path: Path) -> Iterator[ReplicatedPostgres]:
    yield from replicated(tmp_path, synchronous=False)


def orders_on(pair: ReplicatedPostgres) -> dict[str, str]:
    """Every order on the new primary (the promoted standby): public id → name."""
    with psycopg.connect(host="127.0.0.1", port=pair.standby.port, user="postgres",
                         dbname=DATABASE) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        return dict(conn.execute("SELECT public_id, customer_name FROM orders").fetchall())


def soak(servers, pair: ReplicatedPostgres, fault) -> Verdict:
    """Two app instances under load; ``fault`` runs 40 % into the soak."""
    seconds = soak_seconds()
    with LiveServer(servers, workers=2, threads=4, DATABASE_URL=pair.url(DATABASE)) as a, \
            LiveServer(servers, workers=2, threads=4, DATABASE_URL=pair.url(DATABASE)) as b:
        load = Load([a.port, b.port])
        began = load.run(seconds, fault, fault_at=seconds * 0.4)
        # The same gunicorn processes, never restarted, serve from the new primary.
        for live in (a, b):
            assert live.process.poll() is None, live.output()[-2000:]
            page = request(live.port, "GET", "/orders/new")
            assert page.status == 200
        verdict = judge(load, orders_on(pair), began)
        for public_id in list(orders_on(pair))[-3:]:
            assert request(b.port, "GET", f"/orders/{public_id}").status == 200
        for public_id in verdict.lost[:3]:  # what a lost order's confirmation link shows
            page = request(a.port, "GET", f"/orders/{public_id}")
            assert page.status == 404
        return verdict


@pytest.mark.soak
def test_synchronous_standby_promoted_after_a_crash_loses_no_acknowledged_order(
        servers, synchronous_pair, report):
    pair = synchronous_pair

    def failover() -> None:
        pair.kill_primary()
        time.sleep(PROMOTE_AFTER)
        pair.promote()
        pair.standalone()

    verdict = soak(servers, pair, failover)
    report(f"PostgreSQL synchronous failover: {verdict.summary()}")
    assert verdict.lost == [], "a customer was sent to an order that no longer exists"
    assert verdict.duplicates == [] and verdict.split == []
    assert verdict.bad == [], "a submit was answered without the customer's input"
    assert verdict.back_after is not None and verdict.back_after < 15, verdict.summary()
    assert verdict.placed > 0


@pytest.mark.soak
def test_asynchronous_standby_behind_at_the_crash_loses_acknowledged_orders_and_says_how_many(
        servers, asynchronous_pair, report):
    """Not a guarantee but a figure: the orders committed while the standby was
    one second behind die with the primary. DEPLOY.md quotes it."""
    pair = asynchronous_pair

    def failover() -> float:
        walreceiver = pair.hold_standby()
        time.sleep(1.0)
        crashed = time.monotonic()
        pair.kill_primary()
        pair.drop_unreceived_wal(walreceiver)
        pair.promote()
        pair.standalone()
        return crashed

    verdict = soak(servers, pair, failover)
    report(f"PostgreSQL asynchronous failover, standby 1 s behind: {verdict.summary()}; "
           f"acknowledged orders lost: {len(verdict.lost)}")
    assert verdict.duplicates == [] and verdict.split == []
    assert verdict.bad == []
    assert verdict.back_after is not None
