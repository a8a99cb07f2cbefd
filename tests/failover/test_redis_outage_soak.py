"""Redis goes away and comes back, again and again, under load: the forms keep working.

Two gunicorn instances share PostgreSQL and one Redis (persistent, as in production),
which is stopped for ``OUTAGE`` seconds in every ``CYCLE``: 3 s in every 8 s, twice (20 s
of load), in the default run, 30 s in every minute in the long form (scripts/soak). Customers
open forms, some keep one open across an outage's start or end, and submit 1-3 times
(sometimes at once, to both instances). Across each outage two storms send one token
again and again: one drawn before it (a Redis token) from before it began until after
it ended, one drawn during it (a signed token) until after Redis is back, and one drawn
during it and first sent after it.

Then: no order form is answered 5xx, no form places two orders, none is lost (every
order a customer was sent to exists, every form submitted has its order), each storm
places one order, every form drawn while Redis answered has a Redis token, and the
forms drawn during an outage and first sent after it are placed once too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import text

from dev.embedded import EmbeddedRedis
from tests.failover.conftest import soak_seconds
from tests.failover.outage_soak import Outage, OutageLoad, Storm, judge_outages
from tests.support.live import LiveServer

# answers a storm must have had in each phase (before, during, after)
STORM_ANSWERS = 5


def plan(requested: float) -> tuple[float, float, int, float]:
    """(cycle, outage, outages, seconds of load): 3 s in every 8 s, twice at least (the
    suite's short form: each kind of storm sent across two outages' edges), or 30 s in
    every minute for SOAK_SECONDS of 120 or more; then half a cycle with Redis up."""
    cycle, outage = (60.0, 30.0) if requested >= 120 else (8.0, 3.0)
    count = max(2, int(requested // cycle))
    return cycle, outage, count, count * cycle + cycle / 2


CYCLE, OUTAGE, OUTAGES, SECONDS = plan(soak_seconds())


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own: it is stopped and started under the load."""
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    try:
        yield server
    finally:
        server.kill()


def answering(server: EmbeddedRedis) -> None:
    """Start ``server`` and return once it answers PING (its file loaded)."""
    server.start()
    with redis.Redis(port=server.port) as client:
        deadline = time.monotonic() + 30
        while True:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


@pytest.mark.soak
# its load is longer than SOAK_SECONDS' other soaks
@pytest.mark.timeout(SECONDS + 180)
def test_forms_keep_working_while_redis_goes_away_and_comes_back(servers, own_redis, report):
    cycle, outage, count, seconds = CYCLE, OUTAGE, OUTAGES, SECONDS
    outages: list[Outage] = []
    storms: list[Storm] = []
    with (
        LiveServer(servers, workers=2, threads=4, REDIS_URL=own_redis.url) as a,
        LiveServer(servers, workers=2, threads=4, REDIS_URL=own_redis.url) as b,
    ):
        ports = [a.port, b.port]
        load = OutageLoad(ports, open_for=outage)

        def go_away_and_come_back() -> list[float]:
            for n in range(count):
                time.sleep(max(0.0, load.started + n * cycle + (cycle - outage) - time.monotonic()))
                before = Storm(ports, f"Storm {n}-redis").start()
                before.wait_for_answers(0, STORM_ANSWERS)
                gone = Outage(time.monotonic())
                own_redis.stop()
                stopped = time.monotonic()
                outages.append(gone)
                before.wait_for_answers(stopped, STORM_ANSWERS)
                during = Storm(ports, f"Storm {n}-signed").start()
                # drawn now, sent once Redis is back
                held = Storm(ports, f"Storm {n}-held")
                storms.extend((before, during, held))
                during.wait_for_answers(stopped, STORM_ANSWERS)
                time.sleep(max(0.0, gone.down + outage - time.monotonic()))
                answering(own_redis)
                gone.up = time.monotonic()
                held.start()
                for storm in (before, during, held):
                    storm.wait_for_answers(gone.up, STORM_ANSWERS)
                    storm.stop()
            return [outage.down for outage in outages]

        load.run(seconds, go_away_and_come_back, fault_at=0.0)
        for live in (a, b):
            assert live.process.poll() is None, live.output()[-2000:]
    with servers.engine.connect() as conn:
        orders = dict(conn.execute(text("SELECT public_id, customer_name FROM orders")).all())
    verdict = judge_outages(load, storms, outages, orders)
    report(f"Redis outages ({outage:g} s in every {cycle:g} s, {seconds:g} s): {verdict.summary()}")
    assert verdict.outages == count and all(o.up for o in outages)
    assert all(storm.signed is False for storm in storms[::3]), "drawn before the outage"
    assert all(storm.signed for storm in storms[1::3] + storms[2::3]), "drawn during it"
    assert verdict.render_failures == 0, "a form page was not shown"
    assert verdict.five_xx == 0, verdict.summary()
    assert verdict.duplicates == [] and verdict.split == [], verdict.summary()
    assert verdict.lost == [] and verdict.unplaced == [], verdict.summary()
    assert set(verdict.by_status) == {303}, verdict.summary()
    for name, (answers, placed, landed) in verdict.storms.items():
        # Before and during an outage a storm was answered in two phases (waited for above);
        # the held one, sent only once Redis was back, in one.
        phases = 1 if name.endswith("-held") else 2
        assert (placed, landed) == (1, 1) and answers >= phases * STORM_ANSWERS, name
    assert verdict.signed_after_return == [], "Redis answered, yet the form was signed"
    assert verdict.signed_renders > 0, verdict.summary()
