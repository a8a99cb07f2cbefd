"""Order pages: the form, the once-only submit, and the confirmation."""

from __future__ import annotations

import logging
from typing import NamedTuple

from flask import Blueprint, abort, render_template, request, url_for
from flask_wtf.csrf import CSRFError
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from submit_once import (
    Changed,
    Created,
    Duplicate,
    Expired,
    Failed,
    Refused,
    StillRunning,
    Unavailable,
    Unconfirmed,
    request_kind,
)

from ..db import sessions
from ..errors import (
    DEPENDENCY_ERRORS,
    DRAW_FAILURES,
    FORM_TYPES,
    csrf_error,
    plain_page,
    sent_from_another_site,
    unavailable,
    unavailable_cause,
)
from ..extensions import form_tokens
from ..metrics import count_session_mismatch
from ..models import Order
from ..notices import ALREADY_PLACED, notices_for, notify
from ..order_rules import NO_SUCH_ORDER, is_public_id, placed_through_api
from ..placing import OrderDetails, new_order
from .catalogue import active_products, last_known_products
from .forms import OrderForm
from .lookup import find_order
from .messages import (
    CHANGED,
    EXPIRED,
    FORM,
    NOT_CONFIRMED,
    NOT_PLACED,
    SESSION_LOST,
    UNAVAILABLE,
)

bp = Blueprint("orders", __name__)
log = logging.getLogger(__name__)

#: The fields that make an order what it is: a resubmit of one rendering with any of
#: them changed is told so, not landed on the order the first submit placed.
FINGERPRINTED = ("product", "quantity", "name", "email", "address")


#: The order form: named once, answered as a plain POST or as htmx asks (a fragment
#: for the form, HX-Redirect to the order), with the shop's own words for each outcome.
order_form = form_tokens.form(
    FORM, template="orders/new.html", fragment="orders/_order_form.html",
    fields=FINGERPRINTED, fingerprint_of=lambda placed: placed.fingerprint,
    messages={"expired": EXPIRED, "failed": NOT_PLACED, "unconfirmed": NOT_CONFIRMED,
              "unavailable": UNAVAILABLE, "session_lost": SESSION_LOST})


@bp.get("/orders/new")
def new():
    with sessions()() as db:
        form = OrderForm(active_products(db))
    # Back after placing an order shows this page as it was, with the spent token, so
    # submitting it again lands on that order (submit_once.history: render does it).
    return order_form.render(form=form)


@bp.post("/orders")
def create():
    token = form_tokens.submitted_token()  # malformed: 400, Redis untouched
    reject_repeated_fields()
    # A duplicate of an order this worker saw committed needs no validation: the
    # token is spent, the order exists. A first submit pays one dict lookup.
    known = form_tokens.already_submitted(FORM, token, fingerprint=order_form.fingerprint())
    if isinstance(known, Duplicate):
        return landed(known.result, again=True)
    with sessions()() as db:
        form = OrderForm(active_products(db))
    if known is not None:
        return changed(form, known.result)
    if not form.validate():
        return order_form.render(form=form)  # 422: the same token stays valid
    try:
        outcome = order_form.run(
            sessions=sessions(), find=find_placed,
            create=lambda db, digest: place_order(db, form, digest, order_form.fingerprint()))
    except Unavailable:
        return order_form.again("unavailable", form=form, headers={"Retry-After": "5"})
    match outcome:
        case Created(placed) | Duplicate(placed):
            return landed(placed, again=isinstance(outcome, Duplicate))
        case Changed(placed):
            return changed(form, placed)
        case Failed(Refused()) | Expired(waited=True):
            return order_form.again("expired", form=form, message=NOT_PLACED)
        case Unconfirmed():
            # The connection died mid-transaction, perhaps during COMMIT (a database
            # failover): whether the order exists is unknown. The token is back, so
            # the resubmit settles it: it places the order, or the UNIQUE digest
            # lands it on the one that was placed. Never a fresh token here.
            log.warning("order not placed or not confirmed: connection lost")
            return order_form.again("unconfirmed", form=form, headers={"Retry-After": "5"})
        case Failed(error):
            log.warning("order not placed: %s", type(error).__name__)
        case StillRunning() if request_kind() == "html":
            return render_template("orders/still_running.html"), 503, {"Retry-After": "2"}
    return order_form.respond(outcome, form=form, done=lambda placed: order_url(placed))


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


class Placed(NamedTuple):
    """What a submit of the order form placed: the order's keys and the fingerprint
    of the fields it was placed from."""
    public_id: str
    order_number: str
    fingerprint: str | None


def order_url(placed: Placed) -> str:
    """The order's confirmation page."""
    return url_for(".show", public_id=placed.public_id)


def landed(placed: Placed, *, again: bool):
    """To the order's confirmation; a repeat's page says the order was already placed
    (a flashed notice: the URL is the same, and says nothing a link could fake)."""
    if again:
        notify(placed.order_number, ALREADY_PLACED)
    return order_form.landed(order_url(placed), created=not again)


def changed(form: OrderForm, placed: Placed):
    """A resubmit of a used form with other details: those details back in a form
    with a fresh token, and a link to the order the form placed. Nothing is placed
    until the customer submits this form."""
    return order_form.again("changed", form=form, existing_url=order_url(placed),
                            message=CHANGED.format(number=placed.order_number))


def place_order(db: Session, form: OrderForm, digest: str,
                submitted: str | None = None) -> Placed:
    """Insert the order a validated form asks for, in the caller's transaction
    (:func:`webapp.placing.new_order`); returns what was placed."""
    details = OrderDetails(form.product.data, form.quantity.data, form.name.data,
                           form.email.data, form.address.data)
    order = new_order(db, details, digest, submission_fingerprint=submitted)
    db.flush()
    return Placed(order.public_id, order.order_number, submitted)


def find_placed(db: Session, digest: str) -> Placed | None:
    row = db.execute(select(Order.public_id, Order.order_number, Order.submission_fingerprint)
                     .where(Order.submission_digest == digest)).first()
    return None if row is None else Placed(*row)


@bp.errorhandler(CSRFError)
def session_lost(error: CSRFError):
    """The CSRF check on POST /orders failed. A lost or stale session cookie gets the
    form back with what was typed and fresh tokens (the old token is bound to the old
    session), not a dead end; a post from another site is counted and refused."""
    if sent_from_another_site():
        count_session_mismatch(FORM, "cross_site")
    elif request.mimetype in FORM_TYPES:
        count_session_mismatch(FORM)
        try:
            return resubmit_after_session_loss()
        except DRAW_FAILURES as failure:
            return plain_page(failure)
    return csrf_error(error)


def redis_or_database_away(error: Exception):
    """Redis or PostgreSQL did not answer. On the submit, before the token was spent:
    the form again, input kept, same token (503); on a page, the plain 503."""
    if request.method != "POST":  # POST /orders is this blueprint's one submit
        return unavailable(error)
    cause = unavailable_cause(error)
    try:
        return resubmit_when_unavailable(database_ok=isinstance(cause, RedisError))
    except DRAW_FAILURES as failure:
        return plain_page(failure)


for _error in DEPENDENCY_ERRORS:
    bp.register_error_handler(_error, redis_or_database_away)


def resubmit_after_session_loss():
    """The CSRF check failed (session cookie lost or too old): the form again,
    input kept, with tokens for the session the browser has now."""
    return order_form.recover(form=_form_from_request())


def reject_repeated_fields() -> None:
    """400 if a field was sent more than once: a browser never does, and which
    value should win would be a guess."""
    repeated = sorted(name for name, values in request.form.lists() if len(values) > 1)
    if repeated:
        abort(400, f"The field {repeated[0]!r} was sent more than once. Open the form again and "
                   "submit it from there.")


def resubmit_when_unavailable(*, database_ok: bool = True):
    """Redis or PostgreSQL did not answer before this request consumed the
    token: the form again with the input and the same token. A duplicate that
    was waiting on another request may find it consumed; resubmitting then
    lands on that request's order or on "this form expired", never on a second
    order. With PostgreSQL away, the catalogue comes from memory instead of
    another query that would wait out the same timeout."""
    return order_form.again("unavailable", form=_form_from_request(database_ok),
                            headers={"Retry-After": "5"})


def _form_from_request(database_ok: bool = True) -> OrderForm:
    products = None
    if database_ok:
        try:
            with sessions()() as db:
                products = active_products(db)
        except SQLAlchemyError:
            pass
    return OrderForm(last_known_products() if products is None else products)
