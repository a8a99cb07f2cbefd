"""The effect of one refund: one PostgreSQL transaction, applied at most once.

    BEGIN
    INSERT INTO refund_records (idempotency_key, ...)   UNIQUE key: a repeat fails here
    WITH request AS (UPDATE refund_requests SET status = 'applied'
                      WHERE idempotency_key = key AND status = 'requested' ...)
    UPDATE orders SET refunded_cents = refunded_cents + amount,
                      reserved_cents = reserved_cents - (the request's amount, or 0),
                      status = 'refunded' when that makes it whole
     WHERE id = order AND status IN ('paid', 'shipped', 'cancelled')
       AND the request, if there is one, is the one just marked applied
    COMMIT

The reservation the submit made moves to refunded, and the request is marked
applied, in the refund's own transaction: the order page and reconcile-refunds
never see one without the other. A message with no request row (queued by an
older release) applies with nothing reserved; one whose request has failed
(dead-lettered, reservation released) applies nothing: :class:`RequestFailed`.

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
from sqlalchemy import (
    Connection,
    and_,
    any_,
    bindparam,
    case,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg

from ..models import Order, RefundRecord, RefundRequest
from ..order_states import TRANSITIONS
from .stream import RefundMessage

__all__ = ["AlreadyApplied", "Applied", "Rejected", "RequestFailed", "apply_refund",
           "fail_request", "record_refund"]

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
_THIS_REQUEST = RefundRequest.idempotency_key == bindparam("key")
_MATCHES = and_(RefundRequest.status == "requested", RefundRequest.order_id == bindparam("order"),
                RefundRequest.amount_cents == bindparam("amount"))
# The request (if any) is marked applied when it says what the message says;
# its status is returned either way, so the UPDATE of orders can tell.
_REQUEST = (
    update(RefundRequest).where(_THIS_REQUEST)
    .values(status=case((_MATCHES, "applied"), else_=RefundRequest.status),
            updated_at=func.now())
    .returning(RefundRequest.status, RefundRequest.amount_cents)
    .cte("request")
)
_RESERVED = (select(func.coalesce(func.sum(_REQUEST.c.amount_cents), 0))
             .where(_REQUEST.c.status == "applied").scalar_subquery())
_NEW_REFUNDED = Order.refunded_cents + bindparam("amount")
_UPDATE = (
    update(Order)
    .add_cte(_REQUEST)
    .where(Order.id == bindparam("order"), Order.status == any_(bindparam("refundable")),
           ~exists().where(_REQUEST.c.status != "applied"))
    .values(refunded_cents=_NEW_REFUNDED, reserved_cents=Order.reserved_cents - _RESERVED,
            status=case((_NEW_REFUNDED == Order.paid_cents, bindparam("refunded")),
                        else_=Order.status),
            updated_at=func.now())
    .returning(Order.refunded_cents, Order.status)
)
_STATUS = select(Order.status).where(Order.id == bindparam("order"))
_REQUEST_STATUS = select(RefundRequest.status).where(_THIS_REQUEST)
# Giving up on a request: mark it failed and release its reservation, together.
_FAILED = (
    update(RefundRequest).where(_THIS_REQUEST, _MATCHES)
    .values(status="failed", reason=bindparam("reason"), updated_at=func.now())
    .returning(RefundRequest.order_id, RefundRequest.amount_cents)
    .cte("failed")
)
_RELEASE = (
    update(Order).add_cte(_FAILED)
    .where(Order.id == _FAILED.c.order_id)
    .values(reserved_cents=Order.reserved_cents - _FAILED.c.amount_cents, updated_at=func.now())
    .returning(Order.id)
)


class _Sql(str):
    """A statement as psycopg SQL, with the values SQLAlchemy bound for its literals."""
    literals: dict[str, object]


def _psycopg_sql(statement: object) -> _Sql:
    compiled = statement.compile(dialect=postgresql_psycopg.dialect())  # type: ignore[attr-defined]
    sql = _Sql(str(compiled))
    sql.literals = {name: value for name, value in compiled.params.items() if value is not None}
    return sql


_INSERT_SQL, _UPDATE_SQL, _STATUS_SQL, _REQUEST_STATUS_SQL, _RELEASE_SQL = map(
    _psycopg_sql, (_INSERT, _UPDATE, _STATUS, _REQUEST_STATUS, _RELEASE))


async def _execute(conn: AsyncConnection, sql: _Sql, params: dict[str, object]):
    return await conn.execute(sql, {**sql.literals, **params})


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


@dataclass(frozen=True)
class RequestFailed:
    """The message's refund request was given up on (failed, its reservation
    released): this delivery applies nothing. Another copy of it, or one that
    met the request's failing half-way."""


Outcome = Applied | AlreadyApplied | Rejected | RequestFailed


async def apply_refund(
    conn: AsyncConnection,
    refund: RefundMessage,
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
            await _execute(conn, _INSERT_SQL, params)
            row = await (await _execute(conn, _UPDATE_SQL, params)).fetchone()
            if row is None:
                # Raising rolls the insert back with the transaction.
                raise _NotRefundable(await _why_not(conn, refund))
            if before_commit is not None:
                await before_commit()
    except errors.UniqueViolation:
        return AlreadyApplied()
    except errors.CheckViolation:
        return Rejected("the amount is more than is left to refund")
    except errors.ForeignKeyViolation:
        return Rejected("no such order")
    except _RequestFailed:
        return RequestFailed()
    except _NotRefundable as refused:
        return Rejected(str(refused))
    return Applied(*row)


async def fail_request(conn: AsyncConnection, refund: RefundMessage, reason: str) -> str | None:
    """Mark the message's request failed with ``reason`` (plain words, for the
    customer) and release its reservation, in one transaction on ``conn``.

    Returns the request's status afterwards: "failed" (now or earlier),
    "applied" (a delivery committed it: nothing to fail), "requested" (the
    message does not match its request, which is left alone), or None when
    there is no request with this key.
    """
    params = {**_params(refund.key, refund.order_id, refund.amount_cents, ""), "reason": reason}
    async with conn.transaction():
        if await (await _execute(conn, _RELEASE_SQL, params)).fetchone():
            return "failed"
        # A new statement, so a new snapshot: it sees a concurrent apply's commit.
        row = await (await _execute(conn, _REQUEST_STATUS_SQL, params)).fetchone()
    return None if row is None else row[0]


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


class _RequestFailed(Exception):
    pass


async def _why_not(conn: AsyncConnection, refund: RefundMessage) -> str:
    request = await (await _execute(conn, _REQUEST_STATUS_SQL, {"key": refund.key})).fetchone()
    if request is not None and request[0] == "failed":
        raise _RequestFailed
    if request is not None and request[0] != "applied":
        return "the message does not match its refund request"
    row = await (await _execute(conn, _STATUS_SQL, {"order": refund.order_id})).fetchone()
    return "no such order" if row is None else f"the order is {row[0]}"
