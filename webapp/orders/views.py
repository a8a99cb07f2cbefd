"""Order pages: the form, the once-only submit, and the confirmation."""

from __future__ import annotations

import logging
from contextlib import suppress

from flask import Blueprint, abort, current_app, redirect, render_template, request, url_for
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from flask_submit_once import Outcome

from ..extensions import submit_once
from ..models import Order
from ..notices import ALREADY_PLACED, notices_for, notify
from ..order_rules import NO_SUCH_ORDER, is_public_id, placed_through_api
from ..payments import provider
from ..payments.checkout import Declined, charge
from ..placing import OrderDetails, new_order
from .catalogue import active_products, last_known_products
from .forms import CardOrderForm, OrderForm
from .lookup import find_order
from .messages import (
    CARD_DECLINED,
    CHANGED,
    EXPIRED,
    NOT_CONFIRMED,
    NOT_PLACED,
    PAYMENT_NOT_CONFIRMED,
    SESSION_LOST,
    STILL_RUNNING,
    UNAVAILABLE,
)

bp = Blueprint("orders", __name__)
log = logging.getLogger(__name__)

#: The fields that make an order what it is: a resubmit of one rendering with any of
#: them changed is told so, not landed on the order the first submit placed.
FINGERPRINTED = ("product", "quantity", "name", "email", "address")


@bp.get("/orders/new")
def new():
    return render_template("orders/new.html", form=order_form())


@bp.get("/orders")
def index():
    """Where a form page shown again after a plain POST leaves the address bar: to the
    form (a reload there is the browser's "send again?", which is safe)."""
    return redirect(url_for(".new"), 303)


def order_form() -> OrderForm:
    """The order form over the catalogue on sale (as last read, while PostgreSQL is away:
    the submit reads the product again inside its transaction)."""
    if request.method == "POST":
        reject_repeated_fields()
    db = submit_once.session
    try:
        products = active_products(db)
    except SQLAlchemyError:
        if request.method != "POST":
            raise  # a page with nothing to sell: the 503 page
        # The failed read left this request's session in an aborted transaction, the
        # one the submit runs in next: end it, so the submit starts clean.
        with suppress(SQLAlchemyError):
            db.rollback()
        products = last_known_products()
    # The catalogue read is cached for every request of the process: its products must
    # not stay in this request's session, whose ROLLBACK would expire them under the
    # other requests (and whose loads they would then run from other threads).
    for product in products:
        if product in db:
            db.expunge(product)
    client = provider()
    if client is None:
        return OrderForm(products)
    return CardOrderForm(products, client,
                         test_cards=current_app.config["APP_ENV"] != "production")


def answer(outcome: Outcome):
    """The shop's own words around the library's answers."""
    match outcome:
        case Outcome(kind="duplicate", result=Order() as order):
            notify(order.order_number, ALREADY_PLACED)  # the order's page says so once
        case Outcome(kind="unconfirmed", result=Order() as order):
            log.warning("order %s: payment not confirmed yet (%s); a resubmit or the "
                        "sweeper finishes it", order.order_number, type(outcome.error).__name__)
        case Outcome(kind="unconfirmed"):
            log.warning("order not placed or not confirmed: connection lost")
        case Outcome(kind="failed", error=error):
            log.warning("order not placed: %s", type(error).__name__)
    return None


def refused_words(outcome: Outcome) -> str:
    """A declined card (now, or a repeat of the submit it was declined for) says so."""
    declined = isinstance(outcome.error, Declined) or (
        isinstance(outcome.result, Order) and outcome.result.status == "declined")
    return CARD_DECLINED if declined else NOT_PLACED


def unconfirmed_words(outcome: Outcome) -> str:
    """The order is saved but its charge has no answer yet; or the COMMIT itself has none."""
    return PAYMENT_NOT_CONFIRMED if isinstance(outcome.result, Order) else NOT_CONFIRMED


@bp.post("/orders")
@submit_once.form(
    order_form, model=Order, done="orders.show", fields=FINGERPRINTED, answer=answer,
    template="orders/new.html", fragment="orders/_order_form.html", then=charge,
    messages={"changed": lambda outcome: CHANGED.format(number=outcome.result.order_number),
              "expired": lambda outcome: NOT_PLACED if outcome.waited else EXPIRED,
              "refused": refused_words, "failed": NOT_PLACED, "unconfirmed": unconfirmed_words,
              "still_running": STILL_RUNNING, "unavailable": UNAVAILABLE,
              "session_lost": SESSION_LOST})
def create(form: OrderForm, db: Session) -> Order:
    """Place the order the form asks for (:func:`webapp.placing.new_order`); with a card,
    written "charging", and :func:`~webapp.payments.checkout.charge` charges it once the
    row is committed."""
    card = form.payment_method.data if isinstance(form, CardOrderForm) else None
    order = new_order(db, OrderDetails(form.product.data, form.quantity.data, form.name.data,
                                       form.email.data, form.address.data, card or None))
    if not card:
        order.submission_step = None  # no card to charge: no step (the webhook pays it)
    return order


@bp.get("/orders/<public_id>")
def show(public_id: str):
    order = find_order(public_id)
    if order is None:
        if not is_public_id(public_id):  # cut short or mistyped: never an order's
            return render_template("orders/no_such_order.html", reason=NO_SUCH_ORDER), 404
        # A key we could have made: perhaps one the customer was sent to and a
        # database failover lost. Say so, and offer the form again.
        return render_template("orders/not_confirmed.html"), 404
    return render_template("orders/show.html", order=order, through_api=placed_through_api(order),
                           notices=notices_for(order.order_number))


def reject_repeated_fields() -> None:
    """400 if a field was sent more than once: a browser never does, and which value
    should win would be a guess."""
    repeated = sorted(name for name, values in request.form.lists() if len(values) > 1)
    if repeated:
        abort(400, f"The field {repeated[0]!r} was sent more than once. Open the form again and "
                   "submit it from there.")
