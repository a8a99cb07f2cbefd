"""``POST /orders/<id>/amendments``: "Update order N with these details", once.

The form page a used order form comes back to (Back + edit: the library's "changed")
offers it beside "Place another order" and "See order N", while the order can still
change (webapp/orders/amending.py). It is the same form with a second button, which
carries this form's own token (named for the order, like cancel's) and sends the fields
here (``formaction``); "Place another order" carries the order form's token.

The submit is protected like placing (``submit_once.form``): a double click updates
once and lands both clicks on the order; Back to this page and Update again with the
same details lands on it ("already updated"), with other details it is told so and
offered again. A payment, a cancel or a product taken off sale meanwhile refuses the
update in words (409), the details kept, nothing changed; so does an update that landed
from another tab since this page was drawn (the page carries the order's version: the
library's "stale"), with the order's details as they are now beside the ones kept.
views.py registers the route on the order pages' blueprint.
"""

from __future__ import annotations

import logging

from flask import abort, g, request, url_for
from sqlalchemy.orm import Session

from flask_submit_once import Outcome

from .. import mail
from ..extensions import submit_once
from ..shop.lookup import get_order_or_404
from ..shop.models import OrderAmendment
from ..shop.notices import notify
from ..shop.placing import PriceChanged
from .amending import NOT_PLACED_HERE, amend_order, placed, placed_here
from .catalogue import forget_prices
from .forms import OrderForm
from .messages import (
    AMEND_CHANGED,
    AMEND_EXPIRED,
    AMEND_NOT_CONFIRMED,
    AMEND_NOT_DONE,
    AMEND_STALE,
    AMEND_STILL_RUNNING,
    AMENDED,
    AMENDED_ALREADY,
    AMENDED_NOTHING,
    SESSION_LOST,
    UNAVAILABLE,
)
from .order_form import FINGERPRINTED, order_form

__all__ = ["amend"]

log = logging.getLogger(__name__)


def amend_form() -> OrderForm:
    """Before any token is spent: the order (its 404), whether this session placed it
    or confirmed through the order's email (403: a page of another session would offer a
    token that changes it; the 403 page offers the confirmation link), and the order
    form without the card field (an order a card paid is never updated)."""
    order = get_order_or_404((request.view_args or {})["public_id"])
    if not placed_here(order):
        # the 403 page offers a link to the order's email (orders/confirm_by_mail.py)
        g.confirm_offer = mail.enabled()
        abort(403, NOT_PLACED_HERE.format(number=order.order_number))
    g.amend_order = order
    return order_form(card=False)


def order_now() -> dict[str, object]:
    """The order as it is now, for the page drawn again: whether Update is still offered
    (paid or cancelled meanwhile: it is not)."""
    g.placed_order = placed(get_order_or_404(g.amend_order.public_id))
    return {}


def answer(outcome: Outcome):
    """What the order's page says once after an update (or a repeat of one)."""
    match outcome:
        case Outcome(kind="created", result=OrderAmendment() as amendment):
            notify(amendment.order.order_number, AMENDED if amendment.changes else AMENDED_NOTHING)
        case Outcome(kind="duplicate", result=OrderAmendment() as amendment):
            notify(amendment.order.order_number, AMENDED_ALREADY)
        case Outcome(kind="failed" | "unconfirmed", error=error):
            log.warning("order update not confirmed: %s", type(error).__name__)
    return None


def words(template: str):
    return lambda outcome: template.format(number=g.amend_order.order_number)


def stale_words(outcome: Outcome) -> str:
    """Updated from another tab since this page was drawn: the order as it is now (read
    again, as the page is drawn: the update that landed may be newer than this request),
    beside the details the form keeps."""
    order = get_order_or_404(g.amend_order.public_id)
    return AMEND_STALE.format(
        number=order.order_number,
        quantity=order.quantity,
        product=order.product.name,
        name=order.customer_name,
        email=order.email,
        address=", ".join(order.shipping_address.splitlines()),
    )


def amended_url(amendment: OrderAmendment) -> str:
    return url_for("orders.show", public_id=amendment.order.public_id)


@submit_once.form(
    amend_form,
    model=OrderAmendment,
    done=amended_url,
    fingerprint=FINGERPRINTED,
    on_outcome=answer,
    template="orders/new.html",
    fragment="orders/_order_form.html",
    context=order_now,
    messages={
        "changed": words(AMEND_CHANGED),
        "stale": stale_words,
        "expired": words(AMEND_EXPIRED),
        "failed": words(AMEND_NOT_DONE),
        "unconfirmed": words(AMEND_NOT_CONFIRMED),
        "still_running": words(AMEND_STILL_RUNNING),
        "unavailable": UNAVAILABLE,
        "session_lost": SESSION_LOST,
    },
)
def amend(form: OrderForm, db: Session, public_id: str) -> OrderAmendment:
    """Change the order to the form's details in the submit's transaction (the order's
    row locked, the rule, the product and a new product's shown price checked again
    there)."""
    try:
        return amend_order(db, g.amend_order.id, form.details(), new_price=form.new_price.data)
    # the form comes back showing the price as it is now
    except PriceChanged as changed:
        form.show_price(changed.product_id, changed.price_cents)
        forget_prices()
        raise
