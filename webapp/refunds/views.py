"""Requesting a refund for a paid order, once.

The confirmation page links to ``GET /orders/<id>/refund``: a form with its own
single-use token (bound to the endpoint and the order's key). Issuing the token there,
not on the confirmation page, keeps viewing an order free of Redis writes, as for
Cancel. The submit is protected like ordering (``submit_once.form``) and does not
refund: in its one transaction it reserves the amount on the order and inserts a refund
request keyed by the token's digest (requests.py); the relay publishes it to the stream
and the worker applies it. What is left to refund counts requests not yet applied, so a
second page asking for the same money is refused at once.

As for the order form, Back shows the refund page as it was, with its spent token, so
submitting it again lands on the request ("already requested"), never on a second one,
even once nothing is left to refund; with JavaScript the form is posted by htmx, which
swaps a refused amount in place, so Back never meets a POST result. An order placed
through the JSON API is its client's to refund (403 here, nothing requested).

The form may carry a photo (photos.py): its bytes are part of what the request is (a
corrected photo sent with a used token is "changed", never "already requested"), it is
stored in the same transaction as the request, and the submit alone may send a body that
large. A photo the form refused is not kept for the form drawn again; one sent with an
amount that was refused is, so the customer does not pick it again.
"""

from __future__ import annotations

from flask import Blueprint, abort, current_app, g, make_response, render_template, request
from sqlalchemy.orm import Session
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from wtforms.validators import ValidationError

from flask_submit_once import Outcome, Refused

from ..db import sessions
from ..error_pages import render_error
from ..extensions import submit_once
from ..shop.lookup import get_order_or_404
from ..shop.models import Order, RefundRequest
from ..shop.notices import REFUND_ALREADY, REFUND_REQUESTED, notify
from ..shop.order_rules import placed_through_api
from .forms import PHOTO_TOO_LARGE, RefundForm, euros, parse_cents
from .photos import attach_photo, max_photo_bytes, max_photo_mib
from .refusals import NothingToRefund, nothing_left, nothing_to_refund, through_the_api
from .requests import REFUNDABLE, NotEnoughLeft, request_refund, requests_of

bp = Blueprint("refunds", __name__)

CHANGED = (
    "This form was already used to request a refund of {amount}: nothing new was "
    "requested. Check the amount and submit to request another refund."
)
EXPIRED = "This form expired — please check the amount and submit again."
NOT_QUEUED = (
    "We could not take your refund request just now, so nothing was requested. "
    "Please submit again in a few moments."
)
NOT_ENOUGH_LEFT = (
    "Nothing was requested: the amount is more than is left to refund. "
    "Please check it and submit again."
)
STILL_RUNNING = "Your first request is still being taken — submit again in a few seconds."
NOT_CONFIRMED = (
    "We could not confirm your refund request: our order system stopped answering "
    "while taking it. Please submit again in a few moments: if it was taken you "
    "will see it, and it will not be taken twice."
)

bp.register_error_handler(NothingToRefund, nothing_to_refund)


@bp.url_value_preprocessor
def allow_a_photo(endpoint: str | None, _values: dict[str, object] | None) -> None:
    """Let the refund submit's body hold a photo, and only that submit's. Set here: URL
    value preprocessors run before every before_request function, and the CSRF check
    (one of those) reads the body. The room above the photo is what any form may send."""
    if endpoint == "refunds.create":
        request.max_content_length = max_photo_bytes() + current_app.config["MAX_CONTENT_LENGTH"]


@bp.errorhandler(RequestEntityTooLarge)
def too_large(_error: RequestEntityTooLarge):
    """Werkzeug refused the body before anything read it: say it was the photo."""
    return render_error(
        413,
        PHOTO_TOO_LARGE.format(mib=max_photo_mib())
        + " Nothing was requested: go back to the form and send it again.",
    )


@bp.app_template_global()
def refundable_cents(order: Order) -> int:
    """What is left to refund on ``order``: paid, less refunded, less requested and
    not yet applied; 0 unless it is paid, shipped or cancelled."""
    if order.status not in REFUNDABLE:
        return 0
    return order.paid_cents - order.refunded_cents - order.reserved_cents


@bp.app_template_global()
def refund_requests(order: Order) -> list[RefundRequest]:
    """The order's refund requests, for its page: requested, applied or failed."""
    with sessions()() as db:
        return requests_of(db, order.id)


bp.add_app_template_global(max_photo_mib, "refund_photo_mib")


@bp.app_template_filter()
def cents_as_euros(cents: int) -> str:
    return euros(cents)


@bp.get("/orders/<public_id>/refund")
def new(public_id: str):
    """The refund form, with a fresh single-use token; Back shows it as it was."""
    order = get_order_or_404(public_id)
    if placed_through_api(order):
        return through_the_api(order)
    if nothing_left(order):
        raise NothingToRefund(order)
    return render_template(
        "orders/refund.html", order=order, form=RefundForm(refundable_cents(order), formdata=None)
    )


def refund_form() -> RefundForm:
    """Before any token is spent: the order (404), an API client's order refused (403),
    and the form over what is left to refund now."""
    order = g.refund_order = get_order_or_404((request.view_args or {})["public_id"])
    if placed_through_api(order):
        abort(make_response(through_the_api(order)))
    form = g.refund_form = RefundForm(refundable_cents(order))
    return form


def amount_sent(form: RefundForm) -> dict[str, object]:
    """What makes a refund request what it is: its amount in cents, whether or not it
    is still within what is left ("12,50" and "12.50" are one request)."""
    try:
        cents = parse_cents(form.amount.data or "")
    except ValidationError:
        cents = None
    # A file is its name and the SHA-256 of its bytes (the library's fingerprint).
    return {"amount_cents": cents, "photo": form.photo.data or None}


def forget_refused_photo() -> None:
    """Not kept for the form drawn again: left empty, it would be put back and refused."""
    for upload in request.files.getlist("photo"):
        # out of request.files, the request's end no longer closes it (a temporary file)
        upload.close()
    request.files = ImmutableMultiDict(
        [(name, f) for name, f in request.files.items(multi=True) if name != "photo"]
    )


def answer(outcome: Outcome):
    order: Order = g.refund_order
    if outcome.kind == "invalid" and g.refund_form.photo.errors:
        forget_refused_photo()
    match outcome:
        case Outcome(kind="invalid") if nothing_left(order):
            # a page of its own, saying why
            raise NothingToRefund(order)
        case Outcome(kind="created"):
            notify(order.order_number, REFUND_REQUESTED)
        case Outcome(kind="duplicate"):
            # Back to the form that did it
            notify(order.order_number, REFUND_ALREADY)
    return None


def order_now() -> dict[str, object]:
    """The order as it is now, for the form drawn again: what is left may have changed
    since the form was validated (a refund applied or requested meanwhile is why this
    one was refused), and the amount's hint says what is left now."""
    order = get_order_or_404(g.refund_order.public_id)
    g.refund_form.left_cents = refundable_cents(order)
    return {"order": order}


@bp.post("/orders/<public_id>/refunds")
@submit_once.form(
    refund_form,
    model=RefundRequest,
    done="orders.show",
    fingerprint=amount_sent,
    on_outcome=answer,
    template="orders/refund.html",
    fragment="orders/_refund_form.html",
    context=order_now,
    messages={
        "changed": lambda outcome: CHANGED.format(amount=euros(outcome.result.amount_cents)),
        "expired": lambda outcome: NOT_QUEUED if outcome.waited else EXPIRED,
        "failed": NOT_QUEUED,
        "unconfirmed": NOT_CONFIRMED,
        "still_running": STILL_RUNNING,
    },
)
def create(form: RefundForm, db: Session, public_id: str) -> RefundRequest:
    """Record the request, with its photo if it has one, and reserve its amount (the
    token is spent). What is left is checked again by the reserving UPDATE: a refund
    requested or applied since the form was validated makes this one too large."""
    try:
        refund_request = request_refund(db, g.refund_order.id, form.cents)
    except NotEnoughLeft:
        raise Refused(NOT_ENOUGH_LEFT) from None
    if form.accepted_photo is not None:
        attach_photo(db, refund_request, form.accepted_photo)
    return refund_request
