"""The dead-letter stream: refunds the worker gave up on, with the reason.

    refunds:dead     XADD <fields of the message> message_id <id> reason <why> deliveries <n>
    refunds:errors   HASH message id -> last error, so a dead letter can say why

A message lands here when it can never apply (malformed, unknown order, more
than is left to refund) or when it failed ``REFUND_MAX_DELIVERIES`` times.
Operators list them with ``flask --app webapp refund-dead-letters``.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .stream import DEAD_LETTERS, ERRORS, GROUP, STREAM, short

__all__ = ["DeadLetters"]

log = logging.getLogger("webapp.refunds.worker")


class DeadLetters:
    """The worker's side of the dead-letter stream."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.redis = client

    async def bury(self, message_id: str, fields: dict[str, str], reason: str,
                   deliveries: int) -> None:
        """Move the message here with ``reason`` and ack it, in one MULTI/EXEC:
        it is never both acked and lost."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(DEAD_LETTERS, {**fields, "message_id": message_id, "reason": reason,
                                     "deliveries": str(deliveries)})
            pipe.xack(STREAM, GROUP, message_id)
            pipe.hdel(ERRORS, message_id)
            await pipe.execute()
        log.warning("refund %s key=%s dead-lettered: %s", message_id,
                    short(fields.get("key", "")) or "-", reason)

    async def remember_error(self, message_id: str, error: Exception) -> None:
        """Keep the latest failure of a message, for its dead letter's reason."""
        try:
            await self.redis.hset(ERRORS, message_id, f"{type(error).__name__}: {error}"[:500])
        except RedisError:
            pass  # only the dead letter's reason is lost

    async def last_error(self, message_id: str) -> str:
        return await self.redis.hget(ERRORS, message_id) or "unknown error"
