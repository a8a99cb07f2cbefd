"""The order form's step outside the database: charge the order's card, once.

``@submit_once.form(..., then=charge)`` (webapp/orders/views.py) commits the order
``charging`` first, marked with this step still to do, then calls :func:`charge` holding
the order's lock, with an idempotency key the library makes from the submission's digest.
What follows it::

    the provider charged      -> the order is paid, with the charge's id and amount
    the bank declined         -> the order is declined (Declined, a Refused): the form
                                 again with the input and a fresh token; nothing charged
    no answer, a 5xx          -> nothing written: the order stays charging and marked;
                                 a repeat of the submit or the sweeper calls again with
                                 the same key, and the provider answers what it did

The provider keeps a key 24 h (``KEY_SECONDS``); an order left longer than
``LOOK_FIRST_AFTER`` is first looked for among the charges of its payment reference, so
a key the provider has forgotten cannot charge it twice.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, update
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from ..shop.models import Order
from ..shop.order_states import transition
from . import provider
from .client import CardDeclined, CardRefused, Charge, ProviderClient, ProviderUnavailable

__all__ = ["CHECKOUT_SUBMISSION", "Declined", "charge", "checkout_metadata", "record_charge"]

log = logging.getLogger(__name__)
#: The metadata key of the checkout's charge that names its submission.
CHECKOUT_SUBMISSION = "submission"
#: Older than this, an order's charge is looked for before it is asked for (the provider
#: keeps a key 24 h).
LOOK_FIRST_AFTER = timedelta(hours=20)


class Declined(Refused):
    """The bank declined the card: the order is recorded declined, nothing was charged."""


def charge(db: Session, order: Order, key: str) -> None:
    """Charge ``order``'s card its total, once per ``key`` (the library's step)."""
    if order.payment_method is None:
        # placed with no card (no provider configured): the webhook pays it
        return
    client = provider()
    # an app without the setting found a charging order: leave it
    if client is None:
        raise ProviderUnavailable("PAYMENT_PROVIDER_URL is not set")
    try:
        done = charged_before(client, order) or client.charge(
            amount=order.total_cents,
            currency=order.currency,
            payment_method=order.payment_method,
            reference=order.payment_reference,
            key=key,
            metadata=checkout_metadata(order),
        )
    except (CardDeclined, CardRefused) as declined:
        code = declined.code if isinstance(declined, CardDeclined) else str(declined)
        transition(db, order.id, "decline", decline_code=code[:64] or "declined")
        log.info("order %s: card declined (%s); nothing charged", order.order_number, code)
        raise Declined() from declined
    record_charge(db, order.id, done)
    log.info(
        "order %s: charged %d %s (%s)%s",
        order.order_number,
        done.amount,
        done.currency,
        done.id,
        ", answered again for its key" if done.replayed else "",
    )


def checkout_metadata(order: Order) -> dict[str, str]:
    """What the checkout's charge of ``order`` carries, and the provider's events about
    it repeat: the submission that placed the order (its digest's 12-character prefix, as
    the logs name it; a digest, never the token). A webhook takes a charge it has not
    recorded yet for the checkout's own only when this matches (webapp/webhooks/effect.py),
    so another charge of the same reference and amount cannot take its place. The same
    for every retry of the charge, as its idempotency key requires."""
    return {CHECKOUT_SUBMISSION: (order.submission_digest or "")[:12]}


def charged_before(client: ProviderClient, order: Order) -> Charge | None:
    """The charge an old order already has, for an order older than the provider may
    remember its key; None for a younger one (its key answers for it)."""
    if datetime.now(UTC) - order.created_at < LOOK_FIRST_AFTER:
        return None
    found = client.charges(reference=order.payment_reference, status="succeeded")
    return found[0] if found else None


def record_charge(db: Session, order_id: int, done: Charge) -> None:
    """Write what the charge did, in the step's transaction: the order is paid with it.
    Its own webhook may have paid it first with the same charge (nothing to add); an
    order paid some other way meanwhile gets this charge's money too (refundable)."""
    paid = db.execute(
        update(Order)
        .where(Order.id == order_id, Order.status == "charging")
        .values(status="paid", paid_cents=done.amount, charge_id=done.id, updated_at=func.now())
        .returning(Order.id)
    ).first()
    if paid is None:
        db.execute(
            update(Order)
            .where(Order.id == order_id, Order.charge_id.is_(None))
            .values(
                paid_cents=Order.paid_cents + done.amount, charge_id=done.id, updated_at=func.now()
            )
        )
