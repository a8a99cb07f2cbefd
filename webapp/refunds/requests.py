"""Refund requests: the outbox rows, written in the refund submit's one transaction.

    INSERT INTO refund_requests (idempotency_key, order_id, amount_cents)
    UPDATE orders SET reserved_cents = reserved_cents + :amount      the reservation
     WHERE id = :order AND status IN ('paid', 'shipped', 'cancelled')
       AND paid_cents - refunded_cents - reserved_cents >= :amount
     RETURNING status
    SELECT pg_notify('refund_requests', '')                         sent at COMMIT only
    COMMIT

A refund after shipping needs a person: on an order the reserving UPDATE saw
shipped, the request is ``review`` instead, reserved all the same, and nothing
is NOTIFYed: the relay publishes requested rows only, so the worker never sees
it until an operator approves it (:func:`approve_request`, ``flask --app webapp
refunds approve``) or rejects it (:func:`reject_request`, its reservation released).
The same rule holds wherever the money moves, since an order can ship while its
request waits: the worker's transaction sends a request whose order shipped
meanwhile to review (effect.py), and so does a requeue.

Nothing here writes to Redis: the request exists once the transaction commits
and not before, and the relay (relay.py) publishes it afterwards. A request over
what is left fails the conditional UPDATE (and the CHECK on orders would refuse
it anyway): the customer is told at once, nothing is queued.

Two pages for one order, each asking for everything left: the second UPDATE
waits for the first's row lock, re-reads the row, and matches nothing.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ..shop.models import Order, RefundRequest
from ..shop.order_states import TRANSITIONS

__all__ = [
    "APPROVED",
    "CHANNEL",
    "NEEDS_REVIEW",
    "NotEnoughLeft",
    "RequeueRefused",
    "ReviewRefused",
    "approve_request",
    "reject_request",
    "request_refund",
    "requeue_request",
    "requests_of",
]

#: The LISTEN/NOTIFY channel the relay wakes on.
CHANNEL = "refund_requests"
REFUNDABLE = TRANSITIONS["refund"][0]
#: Order statuses whose refund requests wait for an operator before they apply.
NEEDS_REVIEW = frozenset({"shipped"})
#: The reason an approved request carries while requested: the one mark the
#: worker's transaction reads to apply it on a shipped order (effect.py).
APPROVED = "approved after review"
_LEFT = Order.paid_cents - Order.refunded_cents - Order.reserved_cents


class NotEnoughLeft(Exception):
    """The order has less left to refund (paid - refunded - requested) than asked."""


class RequeueRefused(Exception):
    """A dead-lettered request cannot be put back; the message says why."""


class ReviewRefused(Exception):
    """A request cannot be approved or rejected; the message says why."""


def request_refund(db: Session, order_id: int, cents: int, key: str | None = None) -> RefundRequest:
    """Insert the request and reserve ``cents`` on the order, in ``db``'s transaction;
    on a shipped order it waits for review. ``key``: its idempotency key (None in the
    refund form's protected view, whose flush stamps it with the submit's digest).

    The INSERT goes first: a key that was already used fails on its UNIQUE column
    before the reservation is tried, so a resubmit of a request that did commit
    lands on it, even when what is left no longer covers a second one."""
    request = RefundRequest(order_id=order_id, amount_cents=cents)
    if key is not None:
        request.idempotency_key = key
    db.add(request)
    # a repeated key fails here, inside the transaction
    db.flush()
    status = _reserve(db, order_id, cents)
    if status is None:
        raise NotEnoughLeft(order_id)
    # decided on the row the reservation locked
    if status in NEEDS_REVIEW:
        request.status = "review"
    else:
        wake_relay(db)
    return request


def wake_relay(db: Session) -> None:
    """NOTIFY the relay; PostgreSQL delivers it when (and only if) this transaction commits."""
    db.execute(select(func.pg_notify(CHANNEL, "")))


def requests_of(db: Session, order_id: int) -> list[RefundRequest]:
    """The order's refund requests, oldest first, for its page."""
    return list(
        db.scalars(
            select(RefundRequest)
            .where(RefundRequest.order_id == order_id)
            .order_by(RefundRequest.id)
        )
    )


def requeue_request(db: Session, key: str, request_id: str | None = None) -> RefundRequest:
    """Put a failed request back: reserve its amount again and leave it for the
    relay to publish (or for review, if its order has shipped). The dead letter's
    key (and request id, when it has one) must name the request.
    :class:`RequeueRefused` says why it cannot be."""
    request = db.scalar(
        select(RefundRequest).where(RefundRequest.idempotency_key == key).with_for_update()
    )
    if request is None or request_id is not None and str(request.id) != request_id:
        raise RequeueRefused(
            "no refund request has this key and id (a forged message, "
            "or not a refund request at all): nothing to requeue"
        )
    if request.status != "failed":
        raise RequeueRefused(
            f"the request is {request.status}, not failed: it was requeued or applied already"
        )
    status = _reserve(db, request.order_id, request.amount_cents)
    if status is None:
        left = db.scalar(select(_LEFT).where(Order.id == request.order_id))
        raise RequeueRefused(
            f"order {request.order_id} has {left} cents left to refund, "
            f"less than the {request.amount_cents} requested"
        )
    request.reason, request.published_at, request.updated_at = None, None, func.now()
    # shipped since it failed: a person decides, as on a submit
    if status in NEEDS_REVIEW:
        request.status = "review"
    else:
        request.status = "requested"
        wake_relay(db)
    return request


def approve_request(db: Session, request_id: int) -> RefundRequest:
    """Let a request that waits for review be applied: it becomes requested (still
    reserved), marked :data:`APPROVED`, and the relay is woken to publish it (again,
    if the worker sent it to review after publishing it)."""
    request = _waiting_for_review(db, request_id)
    request.status, request.reason, request.published_at = "requested", APPROVED, None
    request.updated_at = func.now()
    wake_relay(db)
    return request


def reject_request(db: Session, request_id: int, reason: str) -> RefundRequest:
    """Refuse a request that waits for review: rejected with ``reason`` (the order
    page shows it) and its reservation released, together."""
    request = _waiting_for_review(db, request_id)
    request.status, request.reason, request.updated_at = "rejected", reason, func.now()
    db.execute(
        update(Order)
        .where(Order.id == request.order_id)
        .values(reserved_cents=Order.reserved_cents - request.amount_cents, updated_at=func.now())
    )
    return request


def _waiting_for_review(db: Session, request_id: int) -> RefundRequest:
    """The request, locked; :class:`ReviewRefused` unless it waits for review."""
    request = db.scalar(
        select(RefundRequest).where(RefundRequest.id == request_id).with_for_update()
    )
    if request is None:
        raise ReviewRefused(f"No refund request has the id {request_id}.")
    if request.status != "review":
        raise ReviewRefused(
            f"Refund request {request_id} is {request.status}, not waiting for review."
        )
    return request


def _reserve(db: Session, order_id: int, cents: int) -> str | None:
    """The conditional UPDATE: the order's status if ``cents`` were left and are
    now reserved, else None."""
    return db.scalar(
        update(Order)
        .where(Order.id == order_id, Order.status.in_(REFUNDABLE), _LEFT >= cents)
        .values(reserved_cents=Order.reserved_cents + cents, updated_at=func.now())
        .returning(Order.status)
    )
