"""The refund stream: what a message holds, how one is appended.

    XADD refunds * key <idempotency key> order <order id> amount <cents> public_id <public id>

The idempotency key is the digest of the refund form's single-use token (bound
to the session and to the form ``refund:<public_id>``), also the key of the
refund_requests row the message was published from. A duplicate submit carries
the same token, so it can only ever name the same key: whatever delivers a
message twice (the relay publishing again after a crash, a redelivery), the
worker's UNIQUE key applies it once.

Every command on these keys touches one key: no MULTI, so the stream works on a
Redis Cluster whatever slots its keys land in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import redis

__all__ = [
    "DEAD_LETTERS", "ERRORS", "GROUP", "STREAM", "MalformedRefund", "RefundMessage",
    "queue_refund", "short",
]

STREAM = "refunds"
GROUP = "refund-workers"
#: Messages the worker gave up on, with the reason; an operator reads them.
DEAD_LETTERS = "refunds:dead"
#: message id -> last error, so a dead letter can say why retries failed.
ERRORS = "refunds:errors"

_KEY_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
MAX_AMOUNT_CENTS = 100_000_000


class MalformedRefund(ValueError):
    """A stream entry that is not a refund request; retrying cannot help."""


@dataclass(frozen=True)
class RefundMessage:
    key: str
    order_id: int
    amount_cents: int
    public_id: str = ""

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> RefundMessage:
        """Parse a stream entry's fields; :class:`MalformedRefund` says what is wrong."""
        key = fields.get("key", "")
        if not _KEY_SHAPE.fullmatch(key):
            raise MalformedRefund("idempotency key missing or malformed")
        try:
            order_id, amount = int(fields["order"]), int(fields["amount"])
        except (KeyError, ValueError):
            raise MalformedRefund("order or amount missing or not a whole number") from None
        if order_id <= 0 or not 0 < amount <= MAX_AMOUNT_CENTS:
            raise MalformedRefund("order or amount out of range")
        return cls(key, order_id, amount, fields.get("public_id", ""))

    def fields(self) -> dict[str, str]:
        return {"key": self.key, "order": str(self.order_id), "amount": str(self.amount_cents),
                "public_id": self.public_id}


def short(key: str) -> str:
    """What a log line shows of a key: the digest prefix, as for order tokens."""
    return key[:12]


def queue_refund(client: redis.Redis, refund: RefundMessage) -> str:
    """Append ``refund`` to the stream; returns the message id. The relay does
    this for refund requests; tests and the benchmark call it directly."""
    return client.xadd(STREAM, refund.fields())
