"""The refund worker's health check and Prometheus metrics, served on
``REFUND_MONITOR_BIND`` (``host:port``, or a port on 127.0.0.1; unset: not served).

    GET /healthz   200 while the worker runs; the JSON body says whether Redis and
                   PostgreSQL answer ("ok" or "degraded"), as the app's /healthz does:
                   restarting the worker does not bring a server back. It names no
                   host or process (the consumer's default name is host-pid). Degraded,
                   it says what the worker cannot do meanwhile ("cannot").
    GET /metrics   refund_worker_processed_total, _applied_total, _dead_lettered_total,
                   _lag_messages and _lag_seconds (the oldest message not yet acked),
                   _degraded (1 while the stream cannot be read: Redis is away).
                   With METRICS_TOKEN set, only with ``Authorization: Bearer <it>``;
                   unset, a 404 in production, as the app's (secret_rules.py).

HEAD answers a GET's headers alone. A small HTTP/1.0 server in the worker's own
event loop: one request per connection, bounded in size and time, so nothing a
client sends can hold the worker up; at most :data:`MAX_CONNECTIONS` at once (more
are answered 503 before anything is read), so idle connections cannot take the
worker's file descriptors. Only a ``Host`` that no DNS answer can point elsewhere
is answered (an IP address or localhost, any port; 400 otherwise): a web page
whose name an attacker rebinds to this address gets nothing. Scrape it by address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time

import redis.asyncio as aioredis
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)
from psycopg_pool import AsyncConnectionPool
from redis.exceptions import RedisError, ResponseError

from ..secret_rules import metrics_access
from .stream import GROUP, STREAM

log = logging.getLogger("webapp.refunds.worker")

__all__ = ["MAX_CONNECTIONS", "Monitor"]

#: Connections served at once; a Prometheus scrape and a health probe need two.
MAX_CONNECTIONS = 64
_MAX_HEAD = 8192
_READ_SECONDS = 5.0
#: Counting the messages not yet delivered stops here (Redis before 7 has no "lag").
_LAG_COUNT_MAX = 100_000
#: What the worker cannot do while a server is away, in the words /healthz uses.
CANNOT = {
    "redis": "read the refund stream: no refund is applied until Redis answers; the "
    "requests taken meanwhile wait in PostgreSQL and are published then",
    "postgres": "apply refunds: PostgreSQL does not answer; the messages stay pending in the "
    "stream and are applied when it does",
}


class Monitor:
    """The worker's counters, and the server that shows them."""

    def __init__(
        self,
        client: aioredis.Redis,
        pool: AsyncConnectionPool,
        metrics_token: str | None = None,
        environment: str = "production",
    ) -> None:
        self.redis, self.pool = client, pool
        self.metrics_token, self.environment = metrics_token, environment
        self.connections = 0
        self.registry = CollectorRegistry()
        self.processed = Counter(
            "refund_worker_processed",
            "Deliveries this process handled, "
            "whatever came of them (applied, acked as done, dead-lettered, "
            "left pending for a retry).",
            registry=self.registry,
        )
        self.applied = Counter(
            "refund_worker_applied", "Refunds this process committed.", registry=self.registry
        )
        self.dead_lettered = Counter(
            "refund_worker_dead_lettered",
            "Messages this process dead-lettered (forged included).",
            registry=self.registry,
        )
        self.lag_messages = Gauge(
            "refund_worker_lag_messages",
            "Messages the group has not acked: pending + not delivered.",
            registry=self.registry,
        )
        self.lag_seconds = Gauge(
            "refund_worker_lag_seconds",
            "Age of the oldest message the group has not acked (0: none).",
            registry=self.registry,
        )
        self.degraded = Gauge(
            "refund_worker_degraded",
            "1 while this worker cannot read the "
            "refund stream (Redis is away): nothing is applied meanwhile.",
            registry=self.registry,
        )
        self.stream_away = False

    async def serve(self, host: str, port: int, stop: asyncio.Event) -> None:
        """Answer on ``host:port`` until ``stop`` is set."""
        server = await asyncio.start_server(self._answer, host, port)
        async with server:
            await stop.wait()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # before reading: it costs nothing more
        if self.connections >= MAX_CONNECTIONS:
            await _reply(writer, "503 Service Unavailable", "text/plain", b"busy\n")
            return
        self.connections += 1
        try:
            await self._answer_one(reader, writer)
        finally:
            self.connections -= 1

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_SECONDS)
            status, content_type, body = await self._route(head[:_MAX_HEAD])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            head, (status, content_type, body) = b"", _BAD_REQUEST
        # the client reset the connection before its request was read
        except OSError:
            writer.close()
            return
        await _reply(writer, status, content_type, body, with_body=not head.startswith(b"HEAD "))

    async def _route(self, head: bytes) -> tuple[str, str, bytes]:
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if not _cannot_be_rebound(_header(lines[1:], "host")):
            return "400 Bad Request", "text/plain", b"unknown Host: use an IP address\n"
        if path == "/healthz":
            checks = {
                "redis": await _probe(self._ping_redis),
                "postgres": await _probe(self._ping_postgres),
            }
            up = all(check["status"] == "up" for check in checks.values())
            body: dict[str, object] = {"status": "ok" if up else "degraded", "checks": checks}
            if not up:
                body["cannot"] = [
                    CANNOT[name] for name, check in checks.items() if check["status"] != "up"
                ]
            return "200 OK", "application/json", json.dumps(body).encode()
        if path == "/metrics":
            access = metrics_access(
                self.metrics_token, self.environment, _header(lines[1:], "authorization")
            )
            if access == "off":
                return "404 Not Found", "text/plain", b"not found\n"
            if access == "refused":
                return "401 Unauthorized", "text/plain", b"A bearer token is required.\n"
            await self.measure_lag()
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
        return "404 Not Found", "text/plain", b"not found\n"

    @property
    def serves_metrics(self) -> bool:
        """False in production without METRICS_TOKEN: /metrics is a 404 there."""
        return metrics_access(self.metrics_token, self.environment, "") != "off"

    def stream_reachable(self, reachable: bool, error: Exception | None = None) -> None:
        """Note whether the worker could read its stream; say so once when that changes."""
        if reachable == (not self.stream_away):
            return
        self.stream_away = not reachable
        self.degraded.set(0 if reachable else 1)
        if reachable:
            log.info("the refund stream answers again: applying refunds")
        else:
            log.warning(
                "Redis does not answer (%s): cannot %s", type(error).__name__, CANNOT["redis"]
            )

    async def measure_lag(self) -> None:
        """Set the lag gauges from the stream (left as they were if Redis is away)."""
        try:
            groups = {group["name"]: group for group in await self.redis.xinfo_groups(STREAM)}
            group = groups.get(GROUP)
            if group is None:
                return
            pending = await self.redis.xpending(STREAM, GROUP)
            after = f"({group['last-delivered-id']}"
            undelivered = await self.redis.xrange(STREAM, min=after, max="+", count=1)
            if group.get("lag") is not None:
                waiting = int(group["lag"])
            else:
                waiting = len(
                    await self.redis.xrange(STREAM, min=after, max="+", count=_LAG_COUNT_MAX)
                )
        # no stream yet
        except ResponseError:
            return
        except RedisError:
            return
        oldest = (
            pending["min"] if pending["pending"] else (undelivered[0][0] if undelivered else None)
        )
        self.lag_messages.set(pending["pending"] + waiting)
        self.lag_seconds.set(
            0 if oldest is None else max(0.0, time.time() - int(oldest.split("-")[0]) / 1000)
        )

    async def _ping_redis(self) -> None:
        if not await self.redis.ping():
            raise RedisError("PING was not answered")

    async def _ping_postgres(self) -> None:
        async with self.pool.connection(timeout=3) as conn:
            await conn.execute("SELECT 1")


_BAD_REQUEST = ("400 Bad Request", "text/plain", b"bad request\n")


async def _reply(
    writer: asyncio.StreamWriter,
    status: str,
    content_type: str,
    body: bytes,
    with_body: bool = True,
) -> None:
    """Write the answer (HEAD: the headers a GET gets, no body) and close."""
    try:
        writer.write(
            f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n".encode()
            + (body if with_body else b"")
        )
        # a client that never reads
        await asyncio.wait_for(writer.drain(), _READ_SECONDS)
    except (OSError, TimeoutError):
        # the client went away, or would not take the answer
        pass
    finally:
        writer.close()


def _cannot_be_rebound(host: str) -> bool:
    """Whether ``host`` (a Host header) is an IP address or localhost, with or without
    a port: names that no attacker's DNS answer can point at this server."""
    name = host.strip()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name.lower() == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _header(lines: list[str], wanted: str) -> str:
    """The value of the first header named ``wanted`` (lower case), or ""."""
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == wanted:
            return value.strip()
    return ""


async def _probe(check) -> dict[str, object]:
    started = time.perf_counter()
    try:
        await asyncio.wait_for(check(), 5)
        result: dict[str, object] = {"status": "up"}
    # any failure of a dependency is "down", never a crash
    except Exception as error:
        result = {"status": "down", "error": type(error).__name__}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result
