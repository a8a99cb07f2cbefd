"""Order pages: the form, the once-only submit, and the confirmation."""

from __future__ import annotations

import logging
from contextlib import suppress

from flask import Blueprint, g, redirect, render_template, url_for
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from flask_submit_once import Outcome

from ..extensions import submit_once
from ..payments.checkout import Declined, charge
from ..shop.lookup import find_order
from ..shop.models import Order
from ..shop.notices import ALREADY_PLACED, notices_for, notify
from ..shop.order_rules import NO_SUCH_ORDER, is_public_id, placed_through_api
from ..shop.placing import PriceChanged, new_order
from . import same_order
from .amend_views import amend
from .amending import placed
from .catalogue import forget_prices
from .forms import CardOrderForm, OrderForm
from .messages import (
    CARD_DECLINED,
    CHANGED,
    CHANGED_FIXED,
    EXPIRED,
    NOT_CONFIRMED,
    NOT_PLACED,
    PAYMENT_NOT_CONFIRMED,
    SESSION_LOST,
    STILL_RUNNING,
    UNAVAILABLE,
)
from .order_form import FINGERPRINTED, order_form
from .review_views import edit, review

bp = Blueprint("orders", __name__)
log = logging.getLogger(__name__)
bp.add_url_rule("/orders/<public_id>/amendments", view_func=amend, methods=["POST"])
bp.add_url_rule("/orders/review", view_func=review, methods=["POST"])
# Edit: a URL of its own, since a POST to /orders/new would drop the browser's copy of the
# details page that Back shows (with its token)
bp.add_url_rule("/orders/details", view_func=edit, methods=["POST"])


@bp.get("/orders/new")
def new():
    # two tabs opened from here share it
    same_order.shopper(create=True)
    # the checkout's first step: its token is the one "Place order" spends (review_views.py)
    return render_template("orders/new.html", form=order_form(card=False), step="details")


@bp.get("/orders")
def index():
    """Where a form page shown again after a plain POST leaves the address bar: to the
    form (a reload there is the browser's "send again?", which is safe)."""
    return redirect(url_for(".new"), 303)


def new_order_form() -> OrderForm:
    """The form the submit validates: it also asks whether this repeats an order placed
    from this session minutes ago (webapp/orders/same_order.py)."""
    form = order_form()
    shopper = same_order.shopper(create=False)

    def asked(form: OrderForm) -> same_order.Earlier | None:
        db = submit_once.session
        try:
            earlier = same_order.earlier_same_order(
                db, form.details(), shopper, form.same_again.data
            )
        # asked again in the transaction, whose outage keeps the form
        except SQLAlchemyError:
            with suppress(SQLAlchemyError):
                db.rollback()
            earlier = None
        g.same_order = earlier
        return earlier

    form.same_order_check = asked
    return form


def answer(outcome: Outcome):
    """The shop's own words around the library's answers; what the form page drawn again
    offers (``g.placed_order``: update the order a used form placed; ``g.same_order``:
    the identical order placed minutes ago, asked about). The row may be unreadable by
    now (PostgreSQL went away after the transaction that decided the outcome): then the
    library's own answer, which was made from what that transaction read."""
    try:
        annotate(outcome)
    except SQLAlchemyError as error:
        log.warning("order answer without the shop's notes: %s", type(error).__name__)
        with suppress(SQLAlchemyError):
            submit_once.session.rollback()
    return None


def annotate(outcome: Outcome) -> None:
    match outcome:
        case Outcome(kind="duplicate", result=Order() as order):
            # the order's page says so once
            notify(order.order_number, ALREADY_PLACED)
        case Outcome(kind="changed", result=Order() as order):
            g.placed_order = placed(order)
        case Outcome(kind="refused", error=same_order.SameOrderRecently() as asked):
            g.same_order = asked.earlier
        case Outcome(kind="unconfirmed", result=Order() as order):
            log.warning(
                "order %s: payment not confirmed yet (%s); a resubmit or the sweeper finishes it",
                order.order_number,
                type(outcome.error).__name__,
            )
        case Outcome(kind="unconfirmed"):
            log.warning("order not placed or not confirmed: connection lost")
        case Outcome(kind="failed", error=error):
            log.warning("order not placed: %s", type(error).__name__)


def changed_words(outcome: Outcome) -> str:
    """A used form sent with other details: what was placed, and what can be done."""
    shown = placed(outcome.result)
    if shown.why_not is None:
        return CHANGED.format(number=shown.number)
    return CHANGED_FIXED.format(number=shown.number, why=shown.why_not)


def refused_words(outcome: Outcome) -> str:
    """A declined card (now, or a repeat of the submit it was declined for) says so; the
    same order placed meanwhile is asked about."""
    if isinstance(outcome.error, same_order.SameOrderRecently | PriceChanged):
        return str(outcome.error)
    declined = isinstance(outcome.error, Declined) or (
        isinstance(outcome.result, Order) and outcome.result.status == "declined"
    )
    return CARD_DECLINED if declined else NOT_PLACED


def unconfirmed_words(outcome: Outcome) -> str:
    """The order is saved but its charge has no answer yet; or the COMMIT itself has none."""
    return PAYMENT_NOT_CONFIRMED if isinstance(outcome.result, Order) else NOT_CONFIRMED


@bp.post("/orders")
@submit_once.form(
    new_order_form,
    model=Order,
    done="orders.show",
    fingerprint=FINGERPRINTED,
    on_outcome=answer,
    template="orders/new.html",
    fragment="orders/_order_form.html",
    then=charge,
    messages={
        "changed": changed_words,
        "expired": lambda outcome: NOT_PLACED if outcome.waited else EXPIRED,
        "refused": refused_words,
        "failed": NOT_PLACED,
        "unconfirmed": unconfirmed_words,
        "still_running": STILL_RUNNING,
        "unavailable": UNAVAILABLE,
        "session_lost": SESSION_LOST,
    },
)
def create(form: OrderForm, db: Session) -> Order:
    """Place the order the form asks for (:func:`webapp.shop.placing.new_order`), at the price
    its page showed; with a card, written "charging", and
    :func:`~webapp.payments.checkout.charge` charges it (that total) once the row is
    committed."""
    card = form.payment_method.data if isinstance(form, CardOrderForm) else None
    details = form.details(card or None)
    shopper = same_order.shopper(create=True)
    assert shopper is not None
    # another tab's identical submit waits for this COMMIT
    same_order.hold(db, shopper)
    earlier = same_order.earlier_same_order(db, details, shopper, form.same_again.data)
    # placed from another tab since this form was validated
    if earlier is not None:
        raise same_order.SameOrderRecently(earlier)
    try:
        order = new_order(db, details, placed_in_session=shopper)
    # the form comes back showing the price as it is now
    except PriceChanged as changed:
        form.show_price(changed.product_id, changed.price_cents)
        forget_prices()
        raise
    if not card:
        # no card to charge: no step (the webhook pays it)
        order.submission_step = None
    return order


@bp.after_request
def ask_with_conflict(response):
    """The same order asked about at validation is a question about the state of this
    session's orders, not a field to fix: 409 (the form and its unspent token), as when
    the transaction asks it."""
    if response.status_code == 422 and g.get("same_order") is not None:
        response.status_code = 409
    return response


@bp.after_request
def too_many_card_checks(response):
    """A form whose card this session may not have checked again (its count spent,
    webapp/payments/card_checks.py) is a 429: the form, its input and its unspent token,
    and when to try again."""
    retry_after = g.get("card_checks_retry_after")
    if response.status_code == 422 and retry_after:
        response.status_code = 429
        response.headers["Retry-After"] = str(retry_after)
    return response


@bp.get("/orders/<public_id>")
def show(public_id: str):
    order = find_order(public_id)
    if order is None:
        # cut short or mistyped: never an order's
        if not is_public_id(public_id):
            return render_template("orders/no_such_order.html", reason=NO_SUCH_ORDER), 404
        # A key we could have made: perhaps one the customer was sent to and a
        # database failover lost. Say so, and offer the form again.
        return render_template("orders/not_confirmed.html"), 404
    return render_template(
        "orders/show.html",
        order=order,
        through_api=placed_through_api(order),
        notices=notices_for(order.order_number),
    )
