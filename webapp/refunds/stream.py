"""The refund stream: what a message holds, how one is appended.

    XADD refunds * request <refund_requests.id> key <idempotency key>
                   order <order id> amount <cents>

A message names the refund_requests row it was published from, and says what
that row says; the worker applies it only if the row agrees (effect.py), so a
message anyone could append to Redis refunds nothing by itself. It never holds
the order's private key (``public_id``): the stream and its dead letters are
readable by whoever reads Redis, and that key opens the order.

The idempotency key is the digest of the refund form's single-use token (bound
to the session and to the form ``refund:<public_id>``), also the row's UNIQUE
key. A duplicate submit carries the same token, so it can only ever name the
same key: whatever delivers a message twice (the relay publishing again after
a crash, a redelivery), the worker's UNIQUE key applies it once.

Every command on these keys touches one key: no MULTI, so the stream works on a
Redis Cluster whatever slots its keys land in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import redis

__all__ = [
    "DEAD_LETTERS",
    "ERRORS",
    "GROUP",
    "STREAM",
    "MalformedRefund",
    "NamesNoRequest",
    "RefundMessage",
    "queue_refund",
    "short",
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


class NamesNoRequest(MalformedRefund):
    """A refund message that names no refund request: nobody asked for it. (The
    relay of a release before migration 0009 published such messages; 0009 has
    their requests published again, with the id.)"""


@dataclass(frozen=True)
class RefundMessage:
    request_id: int
    key: str
    order_id: int
    amount_cents: int

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
        try:
            request_id = int(fields["request"])
        except (KeyError, ValueError):
            raise NamesNoRequest("it names no refund request") from None
        if order_id <= 0 or not 0 < amount <= MAX_AMOUNT_CENTS:
            raise MalformedRefund("order or amount out of range")
        if request_id <= 0:
            raise NamesNoRequest("it names no refund request")
        return cls(request_id, key, order_id, amount)

    def fields(self) -> dict[str, str]:
        return {
            "request": str(self.request_id),
            "key": self.key,
            "order": str(self.order_id),
            "amount": str(self.amount_cents),
        }


def short(key: str) -> str:
    """What a log line shows of a key: the digest prefix, as for order tokens."""
    return key[:12]


def queue_refund(client: redis.Redis, refund: RefundMessage) -> str:
    """Append ``refund`` to the stream; returns the message id. The relay does
    this for refund requests; tests and the benchmark call it directly."""
    return client.xadd(STREAM, refund.fields())
