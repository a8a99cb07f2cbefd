"""What a payment provider's event does to its order, in the caller's transaction.

Events name the order by its payment reference (``order_id`` in the event:
``orders.payment_reference``, what the shop gives the provider), never by its
key or number. The key opens the order's page, cancel and refund, and the
provider's staff, dashboard and delivery logs all hold what its events say; the
number is for people, and guessable. An event naming an order any other way
names no order.

A payment is checked against its order (amount and currency) and always
recorded, with what it did: it pays a placed order whose total it matches;
after a cancel or on an order already paid it is added to ``paid_cents``
(refundable); a wrong amount or currency pays nothing and is kept as a problem
for ``payments reconcile``. Each of these answers 200 ("recorded"): the
provider did its part, and a 4xx would only make it retry an event that will
never match, or page someone at the provider instead of us.

The checkout charges cards itself (webapp/payments/checkout.py), and the provider then
announces the same charge: an event whose ``charge`` is the order's own pays nothing
more (recorded as ``checkout_charge``); one that arrives while the checkout's charge is
still being recorded pays the order with it, and the checkout's record then adds nothing,
but only if its metadata names the order's submission as the checkout's charge does
(``checkout_metadata``): another charge of the same reference and amount meanwhile is not
the checkout's, and is recorded as a problem, the order left charging for its own.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from ..extensions import submit_once
from ..payments.checkout import CHECKOUT_SUBMISSION
from ..refunds.effect import record_refund
from ..shop.models import CHECKOUT_CHARGE, KEPT_REFUNDABLE, Order, PaymentEvent
from ..shop.order_states import TransitionRefused, transition
from .event import PaymentEvent as Event

__all__ = [
    "CHECKOUT_CHARGE",
    "KEPT_REFUNDABLE",
    "NAME",
    "SCOPE",
    "NotApplicableYet",
    "Recorded",
    "UnknownOrder",
    "apply_event",
    "payment_problem",
]

#: Whose event ids the claims are on, and what they are bound to (the digest a provider's
#: refund is keyed by is the claim's: SubmitOnce.key_digest).
SCOPE = "provider"
NAME = "webhook:payments"


class UnknownOrder(Refused):
    """The event names an order we do not have (by payment reference)."""


class NotApplicableYet(Refused):
    """The order's status does not allow the event's effect (yet)."""


@dataclass(frozen=True)
class Recorded:
    """What an event did: the order's status after it, why it did not take its
    plain effect (one of ``PAYMENT_PROBLEMS``) or None, and the order's number."""

    status: str
    problem: str | None = None
    order_number: str = ""


def apply_event(db: Session, event: Event) -> Recorded:
    """Record the event and apply its effect in the caller's transaction. The
    event row goes first: if Redis forgot the event, its UNIQUE id stops the
    effect before it is attempted. The order's row is locked, so a cancel
    committing meanwhile is seen, not raced."""
    order = db.execute(
        select(
            Order.id,
            Order.status,
            Order.currency,
            Order.order_number,
            Order.charge_id,
            Order.submission_digest,
            (Order.unit_price_cents * Order.quantity).label("total"),
        )
        .where(Order.payment_reference == event.order_id)
        .with_for_update()
    ).one_or_none()
    if order is None:
        raise UnknownOrder()
    problem = None if event.currency == order.currency else "currency_mismatch"
    checkout = checkout_charge(order, event) if problem is None else False
    if checkout:
        problem = CHECKOUT_CHARGE
    elif problem is None and event.type == "payment.succeeded":
        problem = payment_problem(order.status, order.total, event.amount_cents)
    recorded = PaymentEvent(
        event_id=event.id,
        type=event.type,
        order_id=order.id,
        amount_cents=event.amount_cents,
        currency=event.currency,
        problem=problem,
    )
    db.add(recorded)
    db.flush()
    number = order.order_number
    if checkout:
        status = order.status
        # ahead of the checkout's record of the same charge
        if status == "charging":
            status = transition(
                db, order.id, "charge", paid_cents=event.amount_cents, charge_id=event.charge
            ).status
        # it paid its order, once
        return Recorded(status, None, number)
    if problem is not None and problem not in KEPT_REFUNDABLE:
        # recorded; the order is left as it was
        return Recorded(order.status, problem, number)
    if problem is not None:
        db.execute(
            update(Order)
            .where(Order.id == order.id)
            .values(paid_cents=Order.paid_cents + event.amount_cents, updated_at=func.now())
        )
        return Recorded(order.status, problem, number)
    order_id = order.id
    if event.type == "refund.succeeded":
        # A refund made at the provider: recorded like the refund worker's, in
        # refund_records with the amount added, so the two always reconcile; its
        # source names the event, which refunds reconcile finds behind it.
        applied = record_refund(
            db.connection(),
            key=claims_digest(event.id),
            order_id=order_id,
            amount_cents=event.amount_cents,
            source=f"webhook:{recorded.id}",
        )
        if applied is None:
            raise NotApplicableYet(str(TransitionRefused("refund", order.status)))
        return Recorded(applied.status, None, number)
    return Recorded(
        transition(db, order_id, "pay", paid_cents=event.amount_cents).status, None, number
    )


def checkout_charge(order: Any, event: Event) -> bool:
    """Whether the event is the checkout's own charge of the order: already recorded
    (its charge id), or still being recorded (the order is charging, for its total, and
    the charge's metadata names the order's submission, as the checkout's carries)."""
    if event.type != "payment.succeeded" or event.charge is None:
        return False
    if event.charge == order.charge_id:
        return True
    if order.status != "charging" or order.charge_id is not None:
        return False
    named = (event.metadata or {}).get(CHECKOUT_SUBMISSION, "")
    submission = (order.submission_digest or "")[:12]
    return (
        event.amount_cents == order.total
        and bool(submission)
        and hmac.compare_digest(named.encode(), submission.encode())
    )


def payment_problem(status: str, total_cents: int, amount_cents: int) -> str | None:
    """Why a payment (in the order's currency) does not simply pay its order."""
    if status == "placed":
        return None if amount_cents == total_cents else "amount_mismatch"
    if status == "cancelled":
        return "after_cancel"
    if status in ("paid", "shipped"):
        return "extra_payment"
    # refunded: nothing can be refunded on it any more
    return "order_closed"


def claims_digest(event_id: str) -> str:
    """The event's 43-character digest, as refund_records wants its key."""
    return submit_once.key_digest(event_id, name=NAME, scope=SCOPE)
