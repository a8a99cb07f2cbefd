"""The effect of one refund: one PostgreSQL transaction, applied at most once.

    BEGIN
    INSERT INTO refund_records (idempotency_key, ...)   UNIQUE key: a repeat fails here
    UPDATE orders SET refunded_cents = refunded_cents + amount,
                      status = 'refunded' when that makes it whole
     WHERE id = order AND status IN ('paid', 'shipped')
    COMMIT

Why the INSERT comes first: two workers holding the same message block on the
unique index until the first commits, then the second fails and does nothing;
neither can touch the order before owning the key.

Why over-refunding is impossible: the CHECK ``refunded_cents <= paid_cents``
on orders refuses the UPDATE whatever the worker believed about the order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from psycopg import AsyncConnection, errors
from sqlalchemy import Connection

from ..order_states import TRANSITIONS
from .stream import RefundRequest

__all__ = ["AlreadyApplied", "Applied", "Rejected", "apply_refund", "record_refund"]

_REFUNDABLE = sorted(TRANSITIONS["refund"][0])
_FULLY_REFUNDED = TRANSITIONS["refund"][1]

_INSERT = """
    INSERT INTO refund_records (idempotency_key, order_id, amount_cents, message_id)
    VALUES (%(key)s, %(order_id)s, %(amount)s, %(message_id)s)
"""
# The conditional UPDATE of order_states.transition("refund"), extended for
# partial refunds: the status changes only when the refund makes the order whole.
_UPDATE = """
    UPDATE orders
       SET refunded_cents = refunded_cents + %(amount)s,
           status = CASE WHEN refunded_cents + %(amount)s = paid_cents
                         THEN %(refunded)s ELSE status END,
           updated_at = now()
     WHERE id = %(order_id)s AND status = ANY(%(refundable)s)
    RETURNING refunded_cents, status
"""


@dataclass(frozen=True)
class Applied:
    refunded_cents: int
    status: str


@dataclass(frozen=True)
class AlreadyApplied:
    """The key is in refund_records: an earlier delivery committed this refund."""


@dataclass(frozen=True)
class Rejected:
    """The refund can never apply (unknown order, wrong status, more than is
    left); nothing was written. Retrying would give the same answer."""
    reason: str


Outcome = Applied | AlreadyApplied | Rejected


async def apply_refund(
    conn: AsyncConnection,
    refund: RefundRequest,
    message_id: str,
    before_commit: Callable[[], Awaitable[None]] | None = None,
) -> Outcome:
    """Apply ``refund`` in one transaction on ``conn`` (autocommit mode).

    Returns the outcome once the transaction is over. Other database errors
    (connection lost, lock timeout) propagate with the transaction rolled
    back: the caller leaves the message pending for a retry. ``before_commit``
    runs inside the transaction; tests use it to stop the worker there.
    """
    params = {"key": refund.key, "order_id": refund.order_id, "amount": refund.amount_cents,
              "message_id": message_id, "refunded": _FULLY_REFUNDED, "refundable": _REFUNDABLE}
    try:
        async with conn.transaction():
            await conn.execute(_INSERT, params)
            row = await (await conn.execute(_UPDATE, params)).fetchone()
            if row is None:
                # Raising rolls the insert back with the transaction.
                raise _NotRefundable(await _why_not(conn, refund.order_id))
            if before_commit is not None:
                await before_commit()
    except errors.UniqueViolation:
        return AlreadyApplied()
    except errors.CheckViolation:
        return Rejected("the amount is more than is left to refund")
    except errors.ForeignKeyViolation:
        return Rejected("no such order")
    except _NotRefundable as refused:
        return Rejected(str(refused))
    return Applied(*row)


def record_refund(connection: Connection, *, key: str, order_id: int, amount_cents: int,
                  source: str) -> Applied | None:
    """The same two statements in the caller's (synchronous) transaction, for a
    refund reported from elsewhere: the payment webhook's ``refund.succeeded``.

    ``None`` when the order's status does not allow a refund (the caller rolls
    back); a repeated ``key`` raises the UNIQUE violation and an amount over
    what is left raises the CHECK violation, as IntegrityError. Keeping one
    writer of ``refunded_cents`` (always with a refund_records row) is what
    lets ``reconcile-refunds`` match.
    """
    params = {"key": key, "order_id": order_id, "amount": amount_cents, "message_id": source,
              "refunded": _FULLY_REFUNDED, "refundable": _REFUNDABLE}
    connection.exec_driver_sql(_INSERT, params)
    row = connection.exec_driver_sql(_UPDATE, params).first()
    return None if row is None else Applied(*row)


class _NotRefundable(Exception):
    pass


async def _why_not(conn: AsyncConnection, order_id: int) -> str:
    row = await (await conn.execute("SELECT status FROM orders WHERE id = %s",
                                    (order_id,))).fetchone()
    return "no such order" if row is None else f"the order is {row[0]}"
