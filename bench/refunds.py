"""Refunds per second, with 1 and 2 worker processes: messages XADDed straight
to the stream, with and without the UNIQUE idempotency key (the cost of the
dedupe), and refund requests through the outbox (rows, relay, worker).

    scripts/bench --refunds [--messages 2000] [--orders 1000] [--repeat 3] [--fast]

Starts its own throwaway PostgreSQL and Redis on free ports (fsync on unless
--fast). "stream": commits published refund_requests rows (untimed), queues
their messages in one go while the workers wait, and times from the first XADD
until the group has acked the last one. "outbox": commits the refund_requests
rows (reserved on their orders) in one transaction that NOTIFYs, and times from
that commit until the last one is applied. The six
set-ups take turns, --repeat times, and the best of each is printed (the
machine is shared: the best run is the one least disturbed). A measurement, not
a test. "Without" drops the unique constraint in this throwaway database only:
the worker's code path is the same. bench/results/refunds.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from sqlalchemy import text

from webapp.db import make_engine
from webapp.redis_urls import make_client
from webapp.refunds.requests import CHANNEL
from webapp.refunds.stream import GROUP, STREAM, RefundMessage

from .servers import databases, wait_until

AMOUNT = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fast", action="store_true", help="fsync off (measures the CPU path)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        databases(Path(tmp), fast=args.fast) as (postgres, store),
    ):
        engine = make_engine(postgres.url("bench"))
        orders = create_orders(engine, args.orders, args.messages)
        client = make_client(store.url)
        env = {
            **os.environ,
            "APP_ENV": "production",
            "DATABASE_URL": postgres.url("bench"),
            "REDIS_URL": store.url,
        }
        results: dict[tuple[int, str], float] = {}
        for _ in range(args.repeat):
            for mode in ("stream", "without", "outbox"):
                set_unique(engine, mode != "without")
                for workers in (1, 2):
                    reset(engine, client)
                    rate = run(env, client, engine, orders, args.messages, workers, mode)
                    results[workers, mode] = max(rate, results.get((workers, mode), 0))
        engine.dispose()
    report(results, args)


def create_orders(engine, count: int, messages: int) -> list[int]:
    paid = AMOUNT * (messages // count + 2)
    with engine.begin() as conn:
        return list(
            conn.scalars(
                text(
                    "INSERT INTO orders (public_id, submission_digest, product_id, quantity, "
                    "unit_price_cents, customer_name, email, shipping_address, status, paid_cents) "
                    "SELECT left(md5(random()::text), 22), md5(random()::text), 1, 1, :paid, 'B', "
                    "'b@example.com', 'X', 'paid', :paid FROM generate_series(1, :n) RETURNING id"
                ),
                {"paid": paid, "n": count},
            )
        )


def set_unique(engine, unique: bool) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE refund_records"))
        conn.execute(
            text("ALTER TABLE refund_records DROP CONSTRAINT IF EXISTS refund_records_key_unique")
        )
        if unique:
            conn.execute(
                text(
                    "ALTER TABLE refund_records ADD CONSTRAINT "
                    "refund_records_key_unique UNIQUE (idempotency_key)"
                )
            )


def reset(engine, client: redis.Redis) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE refund_records, refund_requests"))
        conn.execute(
            text("UPDATE orders SET refunded_cents = 0, reserved_cents = 0, status = 'paid'")
        )
    client.flushall()
    client.xgroup_create(STREAM, GROUP, id="$", mkstream=True)


def run(
    env: dict[str, str],
    client: redis.Redis,
    engine,
    orders: list[int],
    messages: int,
    workers: int,
    mode: str,
) -> float:
    """Refunds per second for ``messages`` distinct refunds and ``workers`` processes."""
    logs = [tempfile.TemporaryFile("w+") for _ in range(workers)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "webapp.refunds.worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for log in logs
    ]
    try:
        for log in logs:
            wait_until(lambda log=log: "reading" in (log.seek(0) or log.read()), "worker start")
        if mode == "outbox":
            start = request(engine, orders, messages)
            wait_until(lambda: applied(engine) == messages, "all applied", poll=0.01)
        else:
            refunds = published(engine, orders, messages)
            start = time.perf_counter()
            with client.pipeline(transaction=False) as pipe:
                for refund in refunds:
                    pipe.xadd(STREAM, refund.fields())
                pipe.execute()
            last = client.xrevrange(STREAM, count=1)[0][0]
            wait_until(lambda: done(client, last), "all acked", poll=0.01)
        elapsed = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        for log in logs:
            log.close()
    return messages / elapsed


def request(engine, orders: list[int], messages: int) -> float:
    """Commit ``messages`` refund requests, reserved, in one transaction that
    NOTIFYs the relays; returns the time of the commit."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO refund_requests (idempotency_key, order_id, amount_cents) "
                "SELECT left(md5(random()::text) || md5(random()::text), 43), o, :amount "
                "FROM unnest(CAST(:orders AS bigint[])) AS o"
            ),
            {"amount": AMOUNT, "orders": [orders[n % len(orders)] for n in range(messages)]},
        )
        reserve(conn)
        conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
    return time.perf_counter()


def reserve(conn) -> None:
    """Reserve every request's amount on its order, as the request form does."""
    conn.execute(
        text(
            "UPDATE orders SET reserved_cents = r.cents FROM (SELECT order_id, "
            "sum(amount_cents) AS cents FROM refund_requests GROUP BY order_id) r "
            "WHERE orders.id = r.order_id"
        )
    )


def published(engine, orders: list[int], messages: int) -> list[RefundMessage]:
    """``messages`` refund requests, reserved and marked published (no relay is
    timed), and the messages that name them: the worker applies only what a row says."""
    with engine.begin() as conn:
        rows = conn.execute(
            text(
                "INSERT INTO refund_requests"
                " (idempotency_key, order_id, amount_cents, published_at) "
                "SELECT k, o, :amount, now() FROM unnest(CAST(:keys AS text[]), "
                "CAST(:orders AS bigint[])) AS r(k, o) RETURNING id, idempotency_key, order_id"
            ),
            {
                "amount": AMOUNT,
                "keys": [secrets.token_urlsafe(32) for _ in range(messages)],
                "orders": [orders[n % len(orders)] for n in range(messages)],
            },
        ).all()
        reserve(conn)
    return [RefundMessage(request_id, key, order_id, AMOUNT) for request_id, key, order_id in rows]


def applied(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM refund_requests WHERE status = 'applied'"))


def done(client: redis.Redis, last: str) -> bool:
    (group,) = client.xinfo_groups(STREAM)
    return group["last-delivered-id"] == last and group["pending"] == 0


def report(results: dict[tuple[int, str], float], args: argparse.Namespace) -> None:
    print(
        f"\n{args.messages} distinct refunds over {args.orders} orders, "
        f"fsync {'off' if args.fast else 'on'}, {os.cpu_count()} CPUs; "
        f"refunds/s, best of {args.repeat}:\n"
    )
    print(
        f"{'workers':>7}  {'stream, UNIQUE key':>18}  {'without':>9}  {'dedupe cost':>11}  "
        f"{'outbox (rows, relay, worker)':>28}"
    )
    for workers in (1, 2):
        with_key, without = results[workers, "stream"], results[workers, "without"]
        cost = (without - with_key) / without * 100
        print(
            f"{workers:>7}  {with_key:>18.0f}  {without:>9.0f}  {cost:>10.1f}%  "
            f"{results[workers, 'outbox']:>28.0f}"
        )


if __name__ == "__main__":
    main()
