"""Trimming keeps everything a worker could still need: what is pending in any
group, and what no group has read yet; it drops only what every group acked."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis.asyncio as aioredis

from webapp.refunds.stream import ERRORS, GROUP, STREAM
from webapp.refunds.trim import trim_acked

# in scripts/test --quick
pytestmark = pytest.mark.quick


def append(rdb) -> str:
    """An entry on the stream; trimming looks at ids, not at what they hold."""
    return rdb.xadd(STREAM, {"n": "1"})


def trim(url: str) -> int:
    """trim_acked in an event loop of its own thread: the browser tests may leave
    one running in this thread."""

    async def run() -> int:
        client = aioredis.Redis.from_url(url, decode_responses=True)
        try:
            return await trim_acked(client)
        finally:
            await client.aclose()

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(lambda: asyncio.run(run())).result()


def test_trim_drops_only_what_every_group_has_acked(servers, rdb):
    ids = [append(rdb) for _ in range(10)]
    rdb.xgroup_create(STREAM, GROUP, id="0")
    rdb.xgroup_create(STREAM, "audit", id="0")
    # 0-5 delivered
    rdb.xreadgroup(GROUP, "a", {STREAM: ">"}, count=6)
    # 3 still pending, 5 too
    rdb.xack(STREAM, GROUP, *ids[:3], ids[4])
    # 0-7 delivered
    rdb.xreadgroup("audit", "b", {STREAM: ">"}, count=8)
    # all acked
    rdb.xack(STREAM, "audit", *ids[:8])
    # 0-2: acked by both groups
    assert trim(servers.redis.url) == 3
    assert [entry_id for entry_id, _ in rdb.xrange(STREAM)] == ids[3:]

    rdb.xack(STREAM, GROUP, ids[3], ids[5])
    assert trim(servers.redis.url) == 2 and rdb.xrange(STREAM)[0][0] == ids[5]
    # 5 is the last GROUP read; 6-9 were never read by it: all kept.
    assert [entry_id for entry_id, _ in rdb.xrange(STREAM)] == ids[5:]


def test_trim_without_a_stream_or_group_does_nothing(servers, rdb):
    assert trim(servers.redis.url) == 0
    append(rdb)
    rdb.xgroup_create(STREAM, GROUP, id="0")
    assert trim(servers.redis.url) == 0 and rdb.xlen(STREAM) == 1


def test_trim_drops_the_errors_of_messages_no_longer_in_the_stream(servers, rdb):
    """refunds:errors keeps a message's last failure for its dead letter; once the
    message has left the stream nothing will read it, so the trimmer drops it."""
    ids = [append(rdb) for _ in range(4)]
    rdb.xgroup_create(STREAM, GROUP, id="0")
    rdb.xreadgroup(GROUP, "a", {STREAM: ">"}, count=4)
    # 2 and 3 still pending, failing
    rdb.xack(STREAM, GROUP, *ids[:2])
    rdb.hset(
        ERRORS,
        mapping={ids[0]: "left behind by a crash", ids[1]: "x", ids[2]: "y", "1-0": "long gone"},
    )
    assert trim(servers.redis.url) == 2
    assert rdb.hgetall(ERRORS) == {ids[2]: "y"}
    rdb.delete(ERRORS)
