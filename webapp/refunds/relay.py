"""The outbox relay: publishes committed refund requests to the stream.

    BEGIN
    SELECT ... FROM refund_requests WHERE published_at IS NULL AND status = 'requested'
     ORDER BY id LIMIT batch FOR UPDATE SKIP LOCKED
    XADD refunds * request <id> key ... (one per row, pipelined)
    UPDATE refund_requests SET published_at = now() WHERE id IN (...)
    COMMIT

Only requested rows are published: a request waiting for review (a refund of a
shipped order) stays here until an operator approves it (``flask --app webapp
refunds approve``), which makes it requested and NOTIFYs. A message names its
row by id and never carries the order's private key.

Where it runs: inside each worker process (``python -m webapp.refunds.worker``),
as one more asyncio task beside the consumer. Nothing new to deploy, start,
monitor or scale: wherever refunds are applied, they are also published, and
the relay stops with the worker (SIGTERM) like everything else in it.

How it finds work: LISTEN refund_requests. The submit's transaction NOTIFYs,
and PostgreSQL delivers a notification only once that transaction commits, so
the relay wakes within milliseconds of a committed request and never sees an
uncommitted one. Notifications are not stored: a relay that was restarting or
whose listening connection dropped misses them, so it also looks every
``REFUND_RELAY_POLL_SECONDS`` (default 2) and on start. A lost NOTIFY costs
latency, never a request: the row is the request.

Several relays (two workers): FOR UPDATE SKIP LOCKED hands each row to one
relay at a time, so they do not publish the same rows side by side. A relay
killed after XADD and before COMMIT leaves its rows unpublished; they are
published again (unless a worker applied the first copy meanwhile), and the
worker's UNIQUE refund_records key makes the second message a no-op (at least
once, as every delivery here). Holding the row locks
across XADD is short (one pipelined round trip) and blocks nobody but a worker
applying one of those very rows, which then waits for the mark.

Back-pressure: the relay publishes only while the stream holds fewer than
``REFUND_STREAM_MAX`` entries (default 2000; the trimmer removes acked ones
every second). When the workers fall behind, the backlog waits in PostgreSQL,
where it is durable and counted by refunds reconcile, not in Redis memory: with
MINID trimming, this is what keeps the stream's length bounded under any load.

The ``refund_published`` signal (sender: the Relay; ``message_id``: the ids
published, space-separated) is sent after the XADDs, before the mark commits:
tests stop the process there (tests/refunds/paused_worker.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractAsyncContextManager, nullcontext

import psycopg
import redis.asyncio as aioredis
from blinker import Namespace
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from redis.exceptions import RedisError

from .requests import CHANNEL
from .settings import WorkerSettings
from .stream import STREAM, RefundMessage

__all__ = ["Relay", "refund_published"]

log = logging.getLogger("webapp.refunds.relay")
refund_published = Namespace().signal("refund-published")

_UNPUBLISHED = """
    SELECT id, idempotency_key, order_id, amount_cents FROM refund_requests
     WHERE published_at IS NULL AND status = 'requested'
     ORDER BY id LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED"""
_STREAM_FULL = -1
_MARK = "UPDATE refund_requests SET published_at = now() WHERE id = ANY(%(ids)s)"


class Relay:
    """Publishes unpublished refund requests, in batches, until stopped."""

    def __init__(
        self, settings: WorkerSettings, client: aioredis.Redis, pool: AsyncConnectionPool
    ) -> None:
        self.settings, self.redis, self.pool = settings, client, pool

    async def run(self, stop: asyncio.Event) -> None:
        """Publish what is waiting, then sleep until a NOTIFY or the poll interval."""
        if self.settings.listen_url is None:
            log.info(
                "relay polls every %g s: DATABASE_URL pools by transaction, where LISTEN hears "
                "nothing, and DATABASE_LISTEN_URL is not set",
                self.settings.relay_poll_seconds,
            )
        while not stop.is_set():
            try:
                async with await self.listening() as listen:
                    while not stop.is_set():
                        published = await self.publish_batch()
                        if published == _STREAM_FULL:
                            # until the trimmer makes room
                            await asyncio.sleep(0.05)
                        # else there may be more
                        elif published < self.settings.batch:
                            await self.wait_for_work(listen, stop)
            except (psycopg.Error, PoolTimeout, RedisError, OSError) as error:
                # The database or Redis is away: what was not marked is published later.
                # Anything else is a bug: it ends the worker loudly rather than spin.
                log.warning("relay: %s; retrying", type(error).__name__)
                await asyncio.sleep(1)

    async def listening(self) -> AbstractAsyncContextManager[AsyncConnection | None]:
        """A connection of its own that LISTENs (its session must last: never through a
        pooler by transaction), or nothing to listen on when there is none."""
        if self.settings.listen_url is None:
            return nullcontext()
        listen = await AsyncConnection.connect(
            self.settings.listen_url, autocommit=True, connect_timeout=3
        )
        try:
            await listen.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await listen.close()
            raise
        return listen

    async def wait_for_work(self, listen: AsyncConnection | None, stop: asyncio.Event) -> None:
        """Return on a notification, on ``stop``, or after the poll interval."""
        deadline = time.monotonic() + self.settings.relay_poll_seconds
        while not stop.is_set() and time.monotonic() < deadline:
            wait = max(0.0, min(0.5, deadline - time.monotonic()))
            if listen is None:
                await asyncio.sleep(wait)
                continue
            async for _ in listen.notifies(timeout=wait, stop_after=1):
                return

    async def publish_batch(self) -> int:
        """Publish up to ``batch`` requests and mark them, in one transaction;
        returns how many, or ``_STREAM_FULL``."""
        if await self.redis.xlen(STREAM) >= self.settings.stream_max:
            return _STREAM_FULL
        async with self.pool.connection() as conn, conn.transaction():
            rows = await (
                await conn.execute(_UNPUBLISHED, {"batch": self.settings.batch})
            ).fetchall()
            if not rows:
                return 0
            async with self.redis.pipeline(transaction=False) as pipe:
                for row in rows:
                    pipe.xadd(STREAM, RefundMessage(*row).fields())
                message_ids = await pipe.execute()
            await refund_published.send_async(self, message_id=" ".join(message_ids))
            await conn.execute(_MARK, {"ids": [row[0] for row in rows]})
        log.info("relay published %d refund requests", len(rows))
        return len(rows)
