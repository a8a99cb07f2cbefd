"""The refund worker: reads the stream through a consumer group, applies each
refund once, acks only after the commit.

    python -m webapp.refunds.worker          (scripts/run starts one beside the app)

One process runs four asyncio tasks: this consumer, the outbox relay that
publishes committed refund requests to the stream (relay.py), the trimmer
that drops what every group has acked (trim.py), and the sweeper that finishes
the card charges submits left to do (webapp/payments/sweeper.py). Redis is
reached through the
app's URL forms (webapp.redis_urls: one server, Cluster or Sentinel).

Applying a refund moves its reservation to refunded and marks its request
applied in the same transaction (effect.py), and only if the refund_requests
row the message names says the same (requested, same order, same amount): a
message with no request behind it is dead-lettered as forged, with a warning
naming the message id, and its request (if it names one) is left alone. One
whose order shipped while it waited goes to review, still reserved, and is acked.

Giving up on one (dead letter) first marks its request failed and releases the
reservation in PostgreSQL, then appends the dead letter, then acks: killed
anywhere in between, the message is delivered again and the same steps repeat,
at worst leaving a second dead letter.

Delivery is at least once; the effect is exactly once. Every path that could
deliver a message twice (a worker killed between COMMIT and XACK, a consumer
presumed dead and its messages claimed, two workers claiming the same message)
ends at the UNIQUE idempotency key in refund_records: the second insert fails,
and the message is acked as already done.

Stopping (SIGTERM or Ctrl-C): no new reads; the batch in flight gets
``REFUND_GRACE_SECONDS`` to finish, then what is left is cancelled. A cancelled
refund rolls back (or, if COMMIT already went through, is acked as done when it
is redelivered). Nothing is ever deleted to "clean up" after a cancellation:
CancelledError is not an Exception, so no handler below can swallow it.

Two signals mark the windows that matter (receivers are coroutine functions,
awaited in the worker's event loop; sender: the RefundWorker; ``message_id``):
``refund_committing`` inside a refund's transaction just before COMMIT, and
``refund_settled`` once its outcome is final (committed now or by an earlier
delivery), just before XACK. Metrics can count there; tests stop the worker
there (tests/refunds/paused_worker.py).

Its log lines are JSON (webapp/logs.py); a line about a message carries the message
id as ``request_id`` and names the order by its number (``order_number``), never by
the internal id. With ``REFUND_MONITOR_BIND`` set it serves /healthz and /metrics
(monitor.py).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from blinker import NamedSignal, Namespace
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from redis.exceptions import RedisError, ResponseError

from .. import logs
from ..db import refuse_unnamed_pooler
from ..payments.sweeper import sweep_while_running
from ..redis_urls import make_async_client
from .dead_letters import DeadLetters, in_plain_words
from .effect import apply_refund, fail_request, order_number
from .monitor import Monitor
from .outcomes import AlreadyApplied, Applied, Forged, NeedsReview, Rejected, RequestFailed
from .relay import Relay
from .settings import WorkerSettings
from .stream import ERRORS, GROUP, STREAM, MalformedRefund, NamesNoRequest, RefundMessage, short
from .trim import trim_while_running

log = logging.getLogger("webapp.refunds.worker")
#: (message id, its fields or None if trimmed from the stream, times delivered)
Delivery = tuple[str, dict[str, str] | None, int]

_signals = Namespace()
refund_committing = _signals.signal("refund-committing")
refund_settled = _signals.signal("refund-settled")


class RefundWorker:
    """One consumer in the ``refund-workers`` group."""

    def __init__(
        self,
        settings: WorkerSettings,
        client: aioredis.Redis,
        pool: AsyncConnectionPool,
        monitor: Monitor | None = None,
    ) -> None:
        self.settings, self.redis, self.pool = settings, client, pool
        self.dead_letters = DeadLetters(client, settings.dead_letters_max)
        self.monitor = monitor or Monitor(client, pool)
        self.claim_cursor = "0-0"

    async def ensure_group(self) -> None:
        """Create the stream and the group (from the start of the stream) if missing."""
        try:
            await self.redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def run(self, stop: asyncio.Event) -> None:
        """Claim stale messages, else read new ones, until ``stop`` is set."""
        while not stop.is_set():
            try:
                batch = await self.claim_stale() or await self.read_new()
            except RedisError as error:
                # said once, not every second
                self.monitor.stream_reachable(False, error)
                await asyncio.sleep(1)
                continue
            self.monitor.stream_reachable(True)
            if batch:
                await self.finish_or_abandon(batch, stop)

    async def claim_stale(self) -> list[Delivery]:
        """XAUTOCLAIM messages idle longer than ``claim_idle_ms`` (their consumer
        died or is stuck), with how often each was delivered."""
        reply = await self.redis.xautoclaim(
            STREAM,
            GROUP,
            self.settings.consumer,
            self.settings.claim_idle_ms,
            start_id=self.claim_cursor,
            count=self.settings.batch,
        )
        self.claim_cursor, messages = reply[0], reply[1]
        if not messages:
            return []
        pending = await self.redis.xpending_range(
            STREAM,
            GROUP,
            min=messages[0][0],
            max=messages[-1][0],
            count=10 * len(messages),
            consumername=self.settings.consumer,
        )
        deliveries = {p["message_id"]: p["times_delivered"] for p in pending}
        return [(mid, fields, deliveries.get(mid, 1)) for mid, fields in messages]

    async def read_new(self) -> list[Delivery]:
        reply = await self.redis.xreadgroup(
            GROUP,
            self.settings.consumer,
            {STREAM: ">"},
            count=self.settings.batch,
            block=self.settings.block_ms,
        )
        return [(mid, fields, 1) for _, messages in reply or [] for mid, fields in messages]

    async def finish_or_abandon(self, batch: list[Delivery], stop: asyncio.Event) -> None:
        """Run the batch concurrently; if ``stop`` comes meanwhile, give it the
        grace period, then cancel what is left (it stays pending, to be claimed)."""
        tasks = [asyncio.create_task(self.handle(*message)) for message in batch]
        pending: set[asyncio.Task] = set(tasks)
        stopping = asyncio.create_task(stop.wait())
        try:
            while pending and not stop.is_set():
                _, pending = await asyncio.wait(
                    pending | {stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stopping)
            if pending:
                _, pending = await asyncio.wait(pending, timeout=self.settings.grace_seconds)
            if pending:
                log.warning(
                    "stopping: abandoning %d refunds in flight (left pending)", len(pending)
                )
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending)
        finally:
            stopping.cancel()
        for task in tasks:
            error = None if task.cancelled() else task.exception()
            if not task.cancelled() and error is None:
                self.monitor.processed.inc()
            # could not ack or dead-letter: still pending
            if isinstance(error, RedisError):
                log.warning("stream unavailable (%s); message left pending", type(error).__name__)
            elif error is not None:
                # a bug in handle(): crash loudly rather than spin
                raise error

    async def handle(self, message_id: str, fields: dict[str, str] | None, deliveries: int) -> None:
        """One message: apply it, then ack; or leave it pending for a retry."""
        # this task's lines (each message has its task)
        logs.bind(request_id=message_id)
        # trimmed from the stream while pending: nothing to apply
        if fields is None:
            await self.redis.xack(STREAM, GROUP, message_id)
            await self.redis.hdel(ERRORS, message_id)
            return
        try:
            refund = RefundMessage.from_fields(fields)
        except NamesNoRequest as error:
            await self.name_order(fields.get("order"))
            await self.bury_forged(message_id, fields, str(error), deliveries)
            return
        except MalformedRefund as error:
            await self.name_order(fields.get("order"))
            await self.dead_letter(message_id, fields, str(error), deliveries)
            return
        if deliveries > self.settings.max_deliveries:
            await self.give_up(message_id, fields, refund, deliveries)
            return
        try:
            async with self.pool.connection() as conn:
                outcome = await apply_refund(
                    conn, refund, message_id, self.announce(refund_committing, message_id)
                )
        # CancelledError is not one: it propagates
        except Exception as error:
            # Connection lost, lock timeout, anything unforeseen: nothing committed,
            # or the commit's fate is unknown. Leave it pending; a redelivery settles it.
            await self.name_order(refund.order_id)
            log.warning(
                "refund %s key=%s failed (delivery %d): %s",
                message_id,
                short(refund.key),
                deliveries,
                type(error).__name__,
                extra={"error": type(error).__name__, "delivery": deliveries},
            )
            await self.dead_letters.remember_error(message_id, error)
            return
        if isinstance(outcome, Applied):
            logs.bind(order_number=outcome.order_number)
            self.monitor.applied.inc()
        else:
            await self.name_order(refund.order_id)
        if isinstance(outcome, Forged):
            await self.bury_forged(message_id, fields, outcome.reason, deliveries)
            return
        if isinstance(outcome, Rejected):
            await self.bury(message_id, fields, outcome.reason, deliveries, refund)
            return
        # another copy, or a bury cut short
        if isinstance(outcome, RequestFailed):
            await self.bury(
                message_id, fields, "its refund request had failed already", deliveries, refund
            )
            return
        await self.announce(refund_settled, message_id)()
        try:
            await self.redis.xack(STREAM, GROUP, message_id)
            # an earlier delivery may have left its error behind
            if deliveries > 1:
                await self.redis.hdel(ERRORS, message_id)
        except RedisError as error:
            log.warning(
                "refund %s key=%s committed, ack failed (%s): will be redelivered",
                message_id,
                short(refund.key),
                type(error).__name__,
            )
            return
        match outcome:
            case Applied(refunded, status, number):
                log.info(
                    "refund %s key=%s applied order=%s amount=%d refunded=%d status=%s",
                    message_id,
                    short(refund.key),
                    number,
                    refund.amount_cents,
                    refunded,
                    status,
                    extra={
                        "outcome": "applied",
                        "amount_cents": refund.amount_cents,
                        "refunded_cents": refunded,
                        "status": status,
                    },
                )
            case AlreadyApplied():
                log.info(
                    "refund %s key=%s already applied: acked",
                    message_id,
                    short(refund.key),
                    extra={"outcome": "already_applied"},
                )
            case NeedsReview(status):
                log.warning(
                    "refund %s key=%s waits for review: the order is %s, nothing "
                    "refunded (flask --app webapp refunds reviews)",
                    message_id,
                    short(refund.key),
                    status,
                    extra={"outcome": "review"},
                )

    async def bury_forged(
        self, message_id: str, fields: dict[str, str], why: str, deliveries: int
    ) -> None:
        """Nobody asked for this refund: dead-letter it, never apply it, and leave
        alone the request it names (a forged copy must not fail a real one)."""
        log.warning(
            "refund %s forged (%s): dead-lettered, not applied",
            message_id,
            why,
            extra={"outcome": "forged"},
        )
        await self.dead_letter(message_id, fields, f"forged: {why}", deliveries)

    async def dead_letter(
        self, message_id: str, fields: dict[str, str], reason: str, deliveries: int
    ) -> None:
        """Dead-letter the message (dead_letters.py), counted."""
        await self.dead_letters.bury(message_id, fields, reason, deliveries)
        self.monitor.dead_lettered.inc()

    async def name_order(self, order_id: object) -> None:
        """Have this message's lines name its order by number (none if the database is
        away or no order has that id: the message may be forged)."""
        try:
            async with self.pool.connection(timeout=1) as conn:
                number = await order_number(conn, int(str(order_id)))
        # nothing to name it by; the line says what happened anyway
        except Exception:
            return
        logs.bind(order_number=number)

    async def give_up(
        self, message_id: str, fields: dict[str, str], refund: RefundMessage, deliveries: int
    ) -> None:
        """Too many deliveries: dead-letter it, unless an earlier one did commit."""
        reason = await self.dead_letters.last_error(message_id)
        await self.bury(
            message_id, fields, f"failed {deliveries - 1} times: {reason}", deliveries, refund
        )

    async def bury(
        self,
        message_id: str,
        fields: dict[str, str],
        reason: str,
        deliveries: int,
        refund: RefundMessage,
    ) -> None:
        """Fail its request (releasing the reservation), then dead-letter the
        message; if the refund was applied after all, just ack it."""
        try:
            async with self.pool.connection() as conn:
                done = await fail_request(conn, refund, in_plain_words(reason)) == "applied"
        # the database is away: try later
        except Exception as error:
            await self.dead_letters.remember_error(message_id, error)
            return
        if done:
            await self.redis.xack(STREAM, GROUP, message_id)
            await self.redis.hdel(ERRORS, message_id)
            log.info(
                "refund %s key=%s already applied: acked",
                message_id,
                short(refund.key),
                extra={"outcome": "already_applied"},
            )
            return
        await self.dead_letter(message_id, fields, reason, deliveries)

    def announce(self, signal: NamedSignal, message_id: str) -> Callable[[], Awaitable[None]]:
        """Awaits ``signal``'s receivers for ``message_id`` (none: returns at once)."""

        async def send() -> None:
            await signal.send_async(self, message_id=message_id)

        return send


async def serve(settings: WorkerSettings) -> None:
    """Run one worker until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    client = make_async_client(settings.redis_url)
    pool = database_pool(settings)
    try:
        async with pool:
            monitor = Monitor(client, pool, settings.metrics_token, settings.environment)
            worker = RefundWorker(settings, client, pool, monitor)
            await worker.ensure_group()
            tasks = [
                worker.run(stop),
                Relay(settings, client, pool).run(stop),
                trim_while_running(client, settings.trim_seconds, stop),
                sweep_while_running(stop, settings.charge_sweep_seconds),
            ]
            if settings.monitor_bind:
                host, port = settings.monitor_bind
                tasks.append(monitor.serve(host, port, stop))
                log.info(
                    "refund worker %s serving %s on %s:%d",
                    settings.consumer,
                    "/healthz and /metrics"
                    if monitor.serves_metrics
                    else "/healthz (/metrics off: METRICS_TOKEN is unset in production)",
                    host,
                    port,
                )
            log.info("refund worker %s reading %s as group %s", settings.consumer, STREAM, GROUP)
            await asyncio.gather(*tasks)
    finally:
        await client.aclose()
    log.info("refund worker %s stopped", settings.consumer)


def database_pool(settings: WorkerSettings) -> AsyncConnectionPool:
    """The worker's connections (+ 1: the relay's publishing transaction), their waits
    bounded: straight to PostgreSQL by the session's settings, sent when connecting;
    behind a pooler by each transaction's own (SET LOCAL), since PgBouncer refuses the
    former and a session's setting would stay on a server connection others go on to use.
    Behind a pooler by transaction nothing is prepared (webapp/db.py says why)."""
    timeouts = {"lock_timeout": f"{settings.lock_timeout_ms}ms", "statement_timeout": "15s"}
    kwargs: dict[str, object] = {"autocommit": True, "connect_timeout": 3}
    connection_class: type[AsyncConnection] = AsyncConnection
    if settings.database_pooler == "none":
        kwargs["options"] = " ".join(f"-c {name}={value}" for name, value in timeouts.items())
    else:
        connection_class = _bounded_transactions(timeouts)
    if settings.database_pooler == "transaction":
        kwargs["prepare_threshold"] = None
    return AsyncConnectionPool(
        settings.database_url,
        min_size=1,
        max_size=settings.concurrency + 1,
        open=False,
        kwargs=kwargs,
        connection_class=connection_class,
    )


def _bounded_transactions(timeouts: dict[str, str]) -> type[AsyncConnection]:
    """A connection class whose every ``transaction()`` first sets ``timeouts`` for itself."""
    bound = "SELECT " + ", ".join(
        f"set_config('{name}', '{value}', true)" for name, value in timeouts.items()
    )

    class BoundedTransactions(AsyncConnection):
        @asynccontextmanager
        async def transaction(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async with super().transaction(*args, **kwargs) as transaction:
                await self.execute(bound)
                yield transaction

    return BoundedTransactions


def main() -> int:
    logs.configure()
    try:
        settings = WorkerSettings.from_environ()
        refuse_unnamed_pooler(settings.database_url, settings.database_pooler)
    except RuntimeError as error:
        log.error("refund worker not started: %s", error)
        return 2
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
