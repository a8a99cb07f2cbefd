"""What came of one delivery of a refund message (effect.py decides, worker.py acts:
apply and ack, ack, dead-letter, or leave for review)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AlreadyApplied",
    "Applied",
    "Forged",
    "NeedsReview",
    "Outcome",
    "Rejected",
    "RequestFailed",
]


@dataclass(frozen=True)
class Applied:
    refunded_cents: int
    status: str
    # what the worker's log names the order by
    order_number: str | None = None


@dataclass(frozen=True)
class AlreadyApplied:
    """The key is in refund_records: an earlier delivery committed this refund."""


@dataclass(frozen=True)
class Rejected:
    """The refund can never apply (unknown order, wrong status, more than is
    left); nothing was written. Retrying would give the same answer."""

    reason: str


@dataclass(frozen=True)
class Forged:
    """No refund request says what the message says: nobody asked for this refund.
    Nothing was written, and the request it names (if any) is left alone."""

    reason: str


@dataclass(frozen=True)
class RequestFailed:
    """The message's refund request was given up on (failed, its reservation
    released): this delivery applies nothing. Another copy of it, or one that
    met the request's failing half-way."""


@dataclass(frozen=True)
class NeedsReview:
    """The order shipped before the refund applied and no operator approved it: the
    request waits for review (``refunds reviews``), reserved; nothing was refunded."""

    order_status: str


Outcome = Applied | AlreadyApplied | Forged | NeedsReview | Rejected | RequestFailed
