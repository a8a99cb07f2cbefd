"""The dead-letter stream: refunds the worker gave up on, with the reason.

    refunds:dead     XADD MAXLEN ~ <REFUND_DEAD_LETTERS_MAX> * request <id> key <key>
                          order <id> amount <cents> message_id <id> reason <why> deliveries <n>
    refunds:errors   HASH message id -> last error, so a dead letter can say why

A message lands here when it can never apply (malformed, forged, more than is
left to refund) or when it failed ``REFUND_MAX_DELIVERIES`` times; its refund
request (if it has one that says what the message says) is marked failed first,
with the reason :func:`in_plain_words`, and its reservation released. A forged
message's request is left alone. Operators list them with ``flask --app webapp
refunds dead-letters`` and put one back, once its cause is fixed, with
``--requeue <id>``.

Both keys are bounded, since anyone who can write to the stream can fill them:
a dead letter keeps only the message's own fields, cut short, and the stream
keeps about the newest ``REFUND_DEAD_LETTERS_MAX`` (10000) letters (the request
of an older one stays failed in PostgreSQL, where refunds reconcile counts it);
an error is deleted when its message is acked, and the trimmer drops those of
messages no longer in the stream (trim.py).

No MULTI: each step touches one key, so this works on a Redis Cluster whatever
slots the keys land in. The order makes it safe: XADD here, then XACK, then
HDEL. Killed after the XADD, the message is delivered again and buried again (a
second dead letter, never a lost one); it is never acked without a dead letter.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .stream import DEAD_LETTERS, ERRORS, GROUP, STREAM, short

__all__ = ["DeadLetters", "in_plain_words", "letter_fields"]

log = logging.getLogger("webapp.refunds.worker")

#: What a dead letter copies of a message: nothing else a writer to Redis added.
_MESSAGE_FIELDS = ("request", "key", "order", "amount")


def letter_fields(fields: dict[str, str]) -> dict[str, str]:
    """The message's own fields, each cut to 64 characters, as its dead letter keeps them."""
    return {name: fields[name][:64] for name in _MESSAGE_FIELDS if name in fields}


class DeadLetters:
    """The worker's side of the dead-letter stream."""

    def __init__(self, client: aioredis.Redis, max_letters: int) -> None:
        self.redis, self.max_letters = client, max_letters

    async def bury(
        self, message_id: str, fields: dict[str, str], reason: str, deliveries: int
    ) -> None:
        """Append the message here with ``reason``, then ack it: never acked and lost."""
        await self.redis.xadd(
            DEAD_LETTERS,
            {
                **letter_fields(fields),
                "message_id": message_id,
                "reason": reason,
                "deliveries": str(deliveries),
            },
            maxlen=self.max_letters,
            approximate=True,
        )
        await self.redis.xack(STREAM, GROUP, message_id)
        await self.redis.hdel(ERRORS, message_id)
        log.warning(
            "refund %s key=%s dead-lettered: %s",
            message_id,
            short(fields.get("key", "")) or "-",
            reason,
        )

    async def remember_error(self, message_id: str, error: Exception) -> None:
        """Keep the latest failure of a message, for its dead letter's reason."""
        try:
            await self.redis.hset(ERRORS, message_id, f"{type(error).__name__}: {error}"[:500])
        except RedisError:
            # only the dead letter's reason is lost
            pass

    async def last_error(self, message_id: str) -> str:
        return await self.redis.hget(ERRORS, message_id) or "unknown error"


def in_plain_words(reason: str) -> str:
    """What the order page says about a failed request, for a dead letter's ``reason``."""
    # gave up after REFUND_MAX_DELIVERIES
    if reason.startswith("failed "):
        return (
            "we could not apply it after several attempts, so nothing was refunded; "
            "our team has been told and will put it right"
        )
    if reason.startswith("the order is "):
        return f"it could not be applied because {reason}"
    if "more than is left" in reason:
        return "the amount was more than is left to refund"
    return "it could not be applied, so nothing was refunded; our team has been told"
