"""Past the pool through one worker: API orders and payment webhooks, ten times redis-py's
pool of 100, 1,000 each (``LEAK_REQUESTS``), in every run.

The house rule: anything made per request is tested at 10× its pool, counting the
connections (Redis and PostgreSQL), files and keys it leaves. On dc90f8e
``idempotency_claims()`` and ``event_claims()`` built a TokenStore per request, and each
took one connection from the pool that the pool never got back (its socket closed when the
store was collected, but the pool still counted it): this test failed there (at 1,000) with
99 orders answered 201, 901 answered 503 (``MaxConnectionsError``) and the 99 webhooks after
them all 503. Redis itself saw no more than 4 connections at a time, so it is the answers
that catch a slot leak; the counts catch a socket leak, which a store that closes nothing
would have.

One gunicorn worker with the production thread count serves as many keep-alive clients as it
has threads; every 100 answers the test reads Redis's ``CLIENT LIST`` and the worker's
``/proc/<pid>/fd``. A thread holds at most one pooled connection at a time, so the worker
never needs more connections than threads, however many requests it serves.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from sqlalchemy import Engine, text

from tests.support.api_client import new_api_key
from tests.support.live import Connection, LiveServer, Response, payment
from webapp.gunicorn_conf import threads as WEB_THREADS
from webapp.webhooks import DEV_SECRET

# of each kind: 10× redis-py's default pool of 100 connections
REQUESTS = int(os.environ.get("LEAK_REQUESTS", "1000"))
SAMPLE_EVERY = 100
# the worker's files after the load, beyond those after the first 100
FD_GROWTH = 5
# this test's own connections, left out of counts
TEST_CLIENT = "per-request-leaks-test"


@dataclass
class Tally:
    """Answers by status; every SAMPLE_EVERY answers, the worker's Redis connections
    and open files."""

    rdb: redis.Redis
    worker: int
    statuses: Counter = field(default_factory=Counter)
    connections: list[int] = field(default_factory=list)
    files: list[int] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, response: Response) -> None:
        with self.lock:
            self.statuses[response.status] += 1
            if response.status < 300:
                self.bodies.append(json.loads(response.body))
            if sum(self.statuses.values()) % SAMPLE_EVERY == 0:
                self.connections.append(app_connections(self.rdb, self.worker))
                self.files.append(open_files(self.worker))


def app_connections(rdb: redis.Redis, worker: int) -> int:
    """The worker's connections to Redis: the clients whose address is one of the
    worker's own sockets (earlier tests' apps may still hold connections to the same
    server)."""
    ports = local_ports(worker)
    return sum(
        1
        for client in rdb.client_list(_type="normal")
        if client.get("name") != TEST_CLIENT and int(client["addr"].rsplit(":", 1)[1]) in ports
    )


def database_connections(engine: Engine, worker: int) -> tuple[int, int]:
    """The worker's connections to PostgreSQL (the backends whose client port is one of the
    worker's sockets), and how many of them are idle in a transaction."""
    ports = local_ports(worker)
    with engine.connect() as conn:
        states = [
            state
            for port, state in conn.execute(
                text("SELECT client_port, state FROM pg_stat_activity WHERE client_port > 0")
            )
            if port in ports
        ]
    return len(states), states.count("idle in transaction")


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of the sockets process ``pid`` has open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def keys_by_kind(rdb: redis.Redis) -> Counter:
    return Counter(key.split(":", 1)[0] for key in rdb.scan_iter(count=1000))


def send_all(port: int, jobs: list, send, tally: Tally) -> list[int]:
    """``send(connection, job)`` for every job, from WEB_THREADS keep-alive clients
    (one connection each); returns how many times each client had to connect."""
    chunks = [jobs[n::WEB_THREADS] for n in range(WEB_THREADS)]

    def client(chunk: list) -> int:
        connection = Connection(port)
        try:
            for job in chunk:
                tally.answered(send(connection, job))
        finally:
            connection.close()
        return connection.connects

    with ThreadPoolExecutor(WEB_THREADS) as pool:
        return list(pool.map(client, chunks))


@pytest.mark.soak
def test_api_orders_and_webhooks_past_the_pool_through_one_worker_leave_no_connections_or_keys(
    servers,
):
    api_key = new_api_key(servers)
    # Every look at Redis from here goes through this named client.
    rdb = redis.Redis.from_url(servers.redis.url, decode_responses=True, client_name=TEST_CLIENT)
    # what the app's client gets
    pool_bound = redis.ConnectionPool().max_connections
    with LiveServer(
        servers, workers=1, threads=WEB_THREADS, PAYMENT_WEBHOOK_SECRET=DEV_SECRET
    ) as live:
        [worker] = live.worker_pids()
        before = app_connections(rdb, worker)
        files_before = open_files(worker)
        # the start-up probe's form page: a form token
        keys_before = keys_by_kind(rdb)
        orders = Tally(rdb, worker)
        order_connects = send_all(
            live.port,
            [f"leak-order-{n}" for n in range(REQUESTS)],
            lambda connection, key: connection.place_order(api_key, key),
            orders,
        )
        placed = list(orders.bodies)
        events = Tally(rdb, worker)
        event_connects = send_all(
            live.port,
            [payment(order, f"evt_leak_{n}") for n, order in enumerate(placed)],
            lambda connection, event: connection.deliver(event),
            events,
        )
        after = app_connections(rdb, worker)
        files_after = open_files(worker)
        database_after, idle_in_transaction = database_connections(servers.engine, worker)
        assert live.worker_pids() == [worker], "the worker was replaced mid-test"
    left = keys_by_kind(rdb) - keys_before
    ttls = {rdb.ttl(key) > 0 for key in rdb.scan_iter(count=1000) if key.startswith("so:")}
    rdb.close()
    samples = [before, *orders.connections, *events.connections, after]
    print(
        f"\n{REQUESTS} API orders: {dict(orders.statuses)}; {REQUESTS} webhooks: "
        f"{dict(events.statuses)}; keep-alive connects {sum(order_connects)} + "
        f"{sum(event_connects)} for {WEB_THREADS} clients; worker's Redis connections "
        f"before {before}, during {orders.connections} / {events.connections}, after "
        f"{after} (min {min(samples)}, max {max(samples)}; pool bound {pool_bound}, "
        f"threads {WEB_THREADS}); worker's open files before {files_before}, after the first "
        f"{SAMPLE_EVERY} {orders.files[0]}, after {files_after}; its PostgreSQL connections "
        f"after {database_after} ({idle_in_transaction} idle in transaction); keys left "
        f"{dict(left)}"
    )

    assert orders.statuses == {201: REQUESTS}, orders.statuses
    assert events.statuses == {200: REQUESTS}, events.statuses
    assert {body["result"] for body in events.bodies} == {"applied"}
    # kept alive
    assert sum(order_connects) + sum(event_connects) == 2 * WEB_THREADS
    assert len(samples) == 2 * REQUESTS // SAMPLE_EVERY + 2
    # One connection per thread at most: far under the pool's 100, and flat from the
    # first sample to the last rather than one more per request.
    assert max(samples) <= WEB_THREADS < pool_bound, samples
    # The database pool keeps some connections (the count sees them), no more than one a
    # thread, none in a transaction.
    assert 1 <= database_after <= WEB_THREADS and idle_in_transaction == 0
    # The pools fill during the first 100 answers; from then on no file may stay open.
    assert files_after - orders.files[0] <= FD_GROWTH, (orders.files, events.files)
    # One claim each (the API's keys and the webhook's event ids, both "so:<digest>"),
    # nothing else.
    assert left == {"so": 2 * REQUESTS}, left
    assert ttls == {True}, "a claim without a TTL"
