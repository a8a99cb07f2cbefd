"""Trimming the refund stream: drop what every consumer group has acked.

    XINFO GROUPS refunds                 each group's last-delivered id and pending count
    XPENDING refunds <group>             the oldest id a group still holds, if any
    XTRIM refunds MINID <oldest kept>    everything older is acked by every group

The cut is the smallest, over the groups, of the oldest pending id (or the
last-delivered id when nothing is pending): entries below it were delivered and
acked by every group, so trimming loses nothing a worker could still need.
``MAXLEN ~`` would bound the length too, but can drop unread messages when the
workers fall behind; MINID cannot. The length is then bounded by what arrives
between two trims plus what is pending, and a pending message is claimed,
retried and dead-lettered after ``REFUND_MAX_DELIVERIES``, so that is bounded too.

Every worker trims every ``REFUND_TRIM_SECONDS``; two trimming at once is
harmless (each cut is safe; the later one wins or does nothing).

    HSCAN refunds:errors; HDEL <ids older than the stream's first entry>

The same pass drops the last errors kept for messages that have left the
stream (a worker killed between XACK and HDEL leaves one behind): nothing will
read them, so the hash is bounded by the stream's length.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from .stream import ERRORS, STREAM

__all__ = ["drop_stale_errors", "trim_acked", "trim_while_running"]

log = logging.getLogger("webapp.refunds.worker")


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def trim_acked(client: aioredis.Redis) -> int:
    """Trim the stream up to what every group has acked, then drop the errors of
    messages no longer in it; returns the stream entries removed."""
    try:
        groups = await client.xinfo_groups(STREAM)
    except ResponseError as error:
        if "no such key" in str(error).lower():
            # no stream yet: nothing to trim
            return 0
        raise
    if not groups:
        return 0
    cuts = []
    for group in groups:
        oldest = None
        # None if all were acked since XINFO: then as below
        if group["pending"]:
            oldest = (await client.xpending(STREAM, group["name"]))["min"]
        cuts.append(oldest or group["last-delivered-id"])
    cut = min(cuts, key=_id)
    if cut == "0-0":
        return 0
    removed = await client.xtrim(STREAM, minid=cut, approximate=False)
    await drop_stale_errors(client)
    return removed


async def drop_stale_errors(client: aioredis.Redis) -> int:
    """HDEL the errors of messages older than the stream's first entry; returns how many."""
    if not await client.hlen(ERRORS):
        return 0
    first = await client.xrange(STREAM, count=1)
    oldest = _id(first[0][0]) if first else None
    stale = [
        message_id
        async for message_id, _ in client.hscan_iter(ERRORS, count=500)
        if oldest is None or _older(message_id, oldest)
    ]
    return await client.hdel(ERRORS, *stale) if stale else 0


def _older(message_id: str, oldest: tuple[int, int]) -> bool:
    try:
        return _id(message_id) < oldest
    # not a stream id: no message will ever read it
    except ValueError:
        return True


async def trim_while_running(client: aioredis.Redis, every: float, stop: asyncio.Event) -> None:
    """Trim every ``every`` seconds until ``stop``: the worker's third task."""
    while not stop.is_set():
        try:
            removed = await trim_acked(client)
            if removed:
                log.debug("trimmed %d acked messages", removed)
        except RedisError as error:
            log.warning("trim: stream unavailable (%s)", type(error).__name__)
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass
