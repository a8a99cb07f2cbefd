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
from sqlalchemy import Connection, any_, bindparam, case, func, insert, select, update
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg

from ..models import Order, RefundRecord
from ..order_states import TRANSITIONS
from .stream import RefundRequest

__all__ = ["AlreadyApplied", "Applied", "Rejected", "apply_refund", "record_refund"]

_REFUNDABLE = sorted(TRANSITIONS["refund"][0])
_FULLY_REFUNDED = TRANSITIONS["refund"][1]

# The statements are built from the models, so table and column names have one
# home (webapp/models.py); the worker runs them as plain psycopg SQL.
_INSERT = insert(RefundRecord).inline().values(
    idempotency_key=bindparam("key"), order_id=bindparam("order"),
    amount_cents=bindparam("amount"), message_id=bindparam("message"),
)
# The conditional UPDATE of order_states.transition("refund"), extended for
# partial refunds: the status changes only when the refund makes the order whole.
_NEW_REFUNDED = Order.refunded_cents + bindparam("amount")
_UPDATE = (
    update(Order)
    .where(Order.id == bindparam("order"), Order.status == any_(bindparam("refundable")))
    .values(refunded_cents=_NEW_REFUNDED,
            status=case((_NEW_REFUNDED == Order.paid_cents, bindparam("refunded")),
                        else_=Order.status),
            updated_at=func.now())
    .returning(Order.refunded_cents, Order.status)
)
_STATUS = select(Order.status).where(Order.id == bindparam("order"))


def _psycopg_sql(statement: object) -> str:
    return str(statement.compile(dialect=postgresql_psycopg.dialect()))  # type: ignore[attr-defined]


_INSERT_SQL, _UPDATE_SQL, _STATUS_SQL = map(_psycopg_sql, (_INSERT, _UPDATE, _STATUS))


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
    params = _params(refund.key, refund.order_id, refund.amount_cents, message_id)
    try:
        async with conn.transaction():
            await conn.execute(_INSERT_SQL, params)
            row = await (await conn.execute(_UPDATE_SQL, params)).fetchone()
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
    params = _params(key, order_id, amount_cents, source)
    connection.execute(_INSERT, params)
    row = connection.execute(_UPDATE, params).first()
    return None if row is None else Applied(*row)


def _params(key: str, order_id: int, amount_cents: int, message_id: str) -> dict[str, object]:
    return {"key": key, "order": order_id, "amount": amount_cents, "message": message_id,
            "refunded": _FULLY_REFUNDED, "refundable": _REFUNDABLE}


class _NotRefundable(Exception):
    pass


async def _why_not(conn: AsyncConnection, order_id: int) -> str:
    row = await (await conn.execute(_STATUS_SQL, {"order": order_id})).fetchone()
    return "no such order" if row is None else f"the order is {row[0]}"
