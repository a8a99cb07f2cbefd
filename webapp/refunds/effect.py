"""The effect of one refund: one PostgreSQL transaction, applied at most once.

    BEGIN
    INSERT INTO refund_records (idempotency_key, ...)   UNIQUE key: a repeat fails here
    WITH request AS (UPDATE refund_requests SET status = 'applied'
                      WHERE id = request AND idempotency_key = key AND status = 'requested'
                        AND order_id = order AND amount_cents = amount)
    UPDATE orders SET refunded_cents = refunded_cents + amount,
                      reserved_cents = reserved_cents - amount,
                      status = 'refunded' when that makes it whole
     WHERE id = order AND status IN ('paid', 'shipped', 'cancelled')
       AND the request was just marked applied
       AND (status <> 'shipped' OR the request was approved after review)
    COMMIT

The database decides: a message refunds only what its refund_requests row says
(requested, the same order, the same amount). Anyone who can write to Redis can
append a message; one with no such row behind it applies nothing and is
:class:`Forged`, whatever order and amount it names. One whose request has
failed (dead-lettered, reservation released) applies nothing: :class:`RequestFailed`.

A refund after shipping needs a person (requests.py), and an order can ship
while its request waits for the worker: the UPDATE reads the status on the row
it locks, so a request whose order is shipped by now, and that no operator
approved, applies nothing and goes to review, still reserved: :class:`NeedsReview`.

The reservation the submit made moves to refunded, and the request is marked
applied, in the refund's own transaction: the order page and refunds reconcile
never see one without the other.

Why the INSERT comes first: two workers holding the same message block on the
unique index until the first commits, then the second fails and does nothing;
neither can touch the order before owning the key.

Why over-refunding is impossible: the CHECK ``refunded_cents <= paid_cents``
on orders refuses the UPDATE whatever the worker believed about the order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from psycopg import AsyncConnection, errors
from sqlalchemy import (
    Connection,
    all_,
    and_,
    any_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg

from ..shop.models import Order, RefundRecord, RefundRequest
from ..shop.order_states import TRANSITIONS
from .outcomes import (
    AlreadyApplied,
    Applied,
    Forged,
    NeedsReview,
    Outcome,
    Rejected,
    RequestFailed,
)
from .requests import APPROVED, NEEDS_REVIEW
from .stream import RefundMessage

__all__ = ["apply_refund", "fail_request", "order_number", "record_refund"]

_REFUNDABLE = sorted(TRANSITIONS["refund"][0])
_NEEDS_REVIEW = sorted(NEEDS_REVIEW)
_FULLY_REFUNDED = TRANSITIONS["refund"][1]

# The statements are built from the models, so table and column names have one
# home (webapp/shop/models.py); the worker runs them as plain psycopg SQL.
_INSERT = (
    insert(RefundRecord)
    .inline()
    .values(
        idempotency_key=bindparam("key"),
        order_id=bindparam("order"),
        amount_cents=bindparam("amount"),
        message_id=bindparam("message"),
    )
)
# The conditional UPDATE of order_states.transition("refund"), extended for
# partial refunds: the status changes only when the refund makes the order whole.
_NEW_REFUNDED = Order.refunded_cents + bindparam("amount")
_REFUND_VALUES = {
    "refunded_cents": _NEW_REFUNDED,
    "status": case((_NEW_REFUNDED == Order.paid_cents, bindparam("refunded")), else_=Order.status),
    "updated_at": func.now(),
}
_REFUNDABLE_ORDER = and_(
    Order.id == bindparam("order"), Order.status == any_(bindparam("refundable"))
)
# The request the message names, marked applied only if it says what the message says.
_THIS_REQUEST = and_(
    RefundRequest.id == bindparam("request"), RefundRequest.idempotency_key == bindparam("key")
)
_MATCHES = and_(
    RefundRequest.status == "requested",
    RefundRequest.order_id == bindparam("order"),
    RefundRequest.amount_cents == bindparam("amount"),
)
_REQUEST = (
    update(RefundRequest)
    .where(_THIS_REQUEST, _MATCHES)
    .values(status="applied", updated_at=func.now())
    .returning(RefundRequest.id, RefundRequest.reason)
    .cte("request")
)
# On the order's row as locked (a ship committed meanwhile is seen), not in the CTE.
_NEEDS_NO_REVIEW = or_(
    Order.status != all_(bindparam("needs_review")),
    select(_REQUEST.c.id).where(_REQUEST.c.reason == APPROVED).exists(),
)
_UPDATE = (
    update(Order)
    .add_cte(_REQUEST)
    .where(_REFUNDABLE_ORDER, select(_REQUEST.c.id).exists(), _NEEDS_NO_REVIEW)
    .values(reserved_cents=Order.reserved_cents - bindparam("amount"), **_REFUND_VALUES)
    .returning(Order.refunded_cents, Order.status, Order.order_number)
)
# A refund made elsewhere and reported by a payment event: no request, nothing reserved.
_REPORTED = (
    update(Order)
    .where(_REFUNDABLE_ORDER)
    .values(**_REFUND_VALUES)
    .returning(Order.refunded_cents, Order.status)
)
_STATUS = select(Order.status).where(Order.id == bindparam("order"))
_NUMBER = select(Order.order_number).where(Order.id == bindparam("order"))
_REQUEST_ROW = select(
    RefundRequest.status,
    RefundRequest.idempotency_key,
    RefundRequest.order_id,
    RefundRequest.amount_cents,
    RefundRequest.reason,
).where(RefundRequest.id == bindparam("request"))
# Sending a request to review: still reserved, only if its order is (still) shipped.
_TO_REVIEW = (
    update(RefundRequest)
    .where(
        _THIS_REQUEST,
        _MATCHES,
        RefundRequest.reason.is_distinct_from(APPROVED),
        select(Order.id)
        .where(Order.id == bindparam("order"), Order.status == any_(bindparam("needs_review")))
        .exists(),
    )
    .values(status="review", updated_at=func.now())
)
_REQUEST_STATUS = select(RefundRequest.status).where(_THIS_REQUEST)
# Giving up on a request: mark it failed and release its reservation, together.
_FAILED = (
    update(RefundRequest)
    .where(_THIS_REQUEST, _MATCHES)
    .values(status="failed", reason=bindparam("reason"), updated_at=func.now())
    .returning(RefundRequest.order_id, RefundRequest.amount_cents)
    .cte("failed")
)
_RELEASE = (
    update(Order)
    .add_cte(_FAILED)
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


(
    _INSERT_SQL,
    _UPDATE_SQL,
    _STATUS_SQL,
    _NUMBER_SQL,
    _REQUEST_ROW_SQL,
    _REQUEST_STATUS_SQL,
    _RELEASE_SQL,
    _TO_REVIEW_SQL,
) = map(
    _psycopg_sql,
    (_INSERT, _UPDATE, _STATUS, _NUMBER, _REQUEST_ROW, _REQUEST_STATUS, _RELEASE, _TO_REVIEW),
)


async def _execute(conn: AsyncConnection, sql: _Sql, params: dict[str, object]):
    return await conn.execute(sql, {**sql.literals, **params})


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
    params = _params(refund, message_id)
    try:
        async with conn.transaction():
            await _execute(conn, _INSERT_SQL, params)
            row = await (await _execute(conn, _UPDATE_SQL, params)).fetchone()
            if row is None:
                # Rolls back the insert, and the request's mark the CTE made: why
                # it matched nothing is read after, on the rows as they are.
                raise _NotApplied
            if before_commit is not None:
                await before_commit()
    except errors.UniqueViolation:
        return AlreadyApplied()
    except errors.CheckViolation:
        return Rejected("the amount is more than is left to refund")
    # every request's order exists: none is behind this
    except errors.ForeignKeyViolation:
        return Forged("no such order, so no refund request")
    except _NotApplied:
        return await _why_not(conn, params)
    return Applied(*row)


async def fail_request(conn: AsyncConnection, refund: RefundMessage, reason: str) -> str | None:
    """Mark the message's request failed with ``reason`` (plain words, for the
    customer) and release its reservation, in one transaction on ``conn``.

    Returns the request's status afterwards: "failed" (now or earlier),
    "applied" (a delivery committed it: nothing to fail), another status (the
    message does not match its request, which is left alone), or None when
    no request has this id and key.
    """
    params = {**_params(refund, ""), "reason": reason}
    async with conn.transaction():
        if await (await _execute(conn, _RELEASE_SQL, params)).fetchone():
            return "failed"
        # A new statement, so a new snapshot: it sees a concurrent apply's commit.
        row = await (await _execute(conn, _REQUEST_STATUS_SQL, params)).fetchone()
    return None if row is None else row[0]


async def order_number(conn: AsyncConnection, order_id: int) -> str | None:
    """The number of order ``order_id`` (what support is quoted), or None if none has it."""
    row = await (await _execute(conn, _NUMBER_SQL, {"order": order_id})).fetchone()
    return None if row is None else row[0]


def record_refund(
    connection: Connection, *, key: str, order_id: int, amount_cents: int, source: str
) -> Applied | None:
    """The same INSERT and the same change to the order, in the caller's
    (synchronous) transaction, for a refund reported from elsewhere: the payment
    webhook's ``refund.succeeded``. No request is behind it and nothing was
    reserved; ``source`` names the payment event (refunds reconcile checks it).

    ``None`` when the order's status does not allow a refund (the caller rolls
    back); a repeated ``key`` raises the UNIQUE violation and an amount over
    what is left raises the CHECK violation, as IntegrityError. Keeping one
    writer of ``refunded_cents`` (always with a refund_records row) is what
    lets ``refunds reconcile`` match.
    """
    params = {
        "key": key,
        "order": order_id,
        "amount": amount_cents,
        "message": source,
        "refunded": _FULLY_REFUNDED,
        "refundable": _REFUNDABLE,
    }
    connection.execute(_INSERT, params)
    row = connection.execute(_REPORTED, params).first()
    return None if row is None else Applied(*row)


def _params(refund: RefundMessage, message_id: str) -> dict[str, object]:
    return {
        "request": refund.request_id,
        "key": refund.key,
        "order": refund.order_id,
        "amount": refund.amount_cents,
        "message": message_id,
        "refunded": _FULLY_REFUNDED,
        "refundable": _REFUNDABLE,
        "needs_review": _NEEDS_REVIEW,
    }


class _NotApplied(Exception):
    pass


async def _why_not(conn: AsyncConnection, params: dict[str, object]) -> Outcome:
    """Why the UPDATE matched nothing, read outside its (rolled back) transaction;
    a request whose order has shipped is sent to review here."""
    row = await (await _execute(conn, _REQUEST_ROW_SQL, params)).fetchone()
    if row is None or row[1] != params["key"]:
        return Forged("no refund request behind it")
    status, _, order_id, amount_cents, reason = row
    if (order_id, amount_cents) != (params["order"], params["amount"]):
        return Forged("it does not say what its refund request says")
    if status == "failed":
        return RequestFailed()
    # another copy committed it meanwhile
    if status == "applied":
        return AlreadyApplied()
    order = await (await _execute(conn, _STATUS_SQL, params)).fetchone()
    # "review": another copy of a message whose request went to review already.
    if status in ("requested", "review") and order[0] in NEEDS_REVIEW and reason != APPROVED:
        # A transaction of its own, so that its waits are bounded behind a pooler too
        # (worker.database_pool).
        async with conn.transaction():
            await _execute(conn, _TO_REVIEW_SQL, params)
        return NeedsReview(order[0])
    # rejected, or review on an order that never shipped
    if status != "requested":
        return Forged(f"its refund request is {status}, not to be applied")
    return Rejected(f"the order is {order[0]}")
