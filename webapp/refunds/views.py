"""Requesting a refund for a paid order, once.

The confirmation page links to ``GET /orders/<id>/refund``: a form with its own
single-use token (form name ``refund:<public_id>``). Issuing the token there,
not on the confirmation page, keeps viewing an order free of Redis writes, as
for Cancel. The submit spends the token through the same ``submit_once`` as
ordering and does not refund: in its one transaction it reserves the amount on
the order and inserts a refund request keyed by the token's digest
(requests.py); the relay publishes it to the stream and the worker applies it.
What is left to refund counts requests not yet applied, so a second page asking
for the same money is refused at once.

As for the order form, Back shows the refund page as it was (``SHOW_AGAIN_ON_BACK``),
with its spent token, so submitting it again lands on the request ("already
requested"), never on a second one; with JavaScript the form is posted by htmx, which
swaps a refused amount in place, so Back never meets a POST result. An order placed
through the JSON API is its client's to refund (403 here, nothing requested).
"""

from __future__ import annotations

from contextlib import suppress

from flask import Blueprint, Response, redirect, render_template, url_for
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from submit_once import (
    SHOW_AGAIN_ON_BACK,
    Changed,
    Created,
    Duplicate,
    Expired,
    Failed,
    Refused,
    StillRunning,
    Unconfirmed,
    fingerprint,
    request_kind,
)

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order, RefundRequest
from ..notices import REFUND_ALREADY, REFUND_REQUESTED, notify
from ..order_rules import placed_through_api
from ..orders.lookup import get_order_or_404
from .forms import RefundForm, euros
from .refusals import NothingToRefund, nothing_left, nothing_to_refund, through_the_api
from .requests import (
    REFUNDABLE,
    NotEnoughLeft,
    Requested,
    find_request,
    request_refund,
    requests_of,
)

bp = Blueprint("refunds", __name__, cli_group=None)

CHANGED = ("This form was already used to request a refund of {amount}: nothing new was "
           "requested. Check the amount and submit to request another refund.")
EXPIRED = "This form expired — please check the amount and submit again."
NOT_QUEUED = ("We could not take your refund request just now, so nothing was requested. "
              "Please submit again in a few moments.")
NOT_ENOUGH_LEFT = ("Nothing was requested: the amount is more than is left to refund. "
                   "Please check it and submit again.")
STILL_RUNNING = "Your first request is still being taken — reload this page in a few seconds."
NOT_CONFIRMED = ("We could not confirm your refund request: our order system stopped answering "
                 "while taking it. Please submit again in a few moments: if it was taken you "
                 "will see it, and it will not be taken twice.")


def form_name(public_id: str) -> str:
    return f"refund:{public_id}"


bp.register_error_handler(NothingToRefund, nothing_to_refund)


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


@bp.get("/orders/<public_id>/refund")
def new(public_id: str):
    """The refund form, with a fresh single-use token; Back shows it as it was."""
    order = get_order_or_404(public_id)
    if placed_through_api(order):
        return through_the_api(order)
    order = refundable_order_or_abort(public_id, order)
    page, status, headers = render_form(order, RefundForm(refundable_cents(order),
                                                          formdata=None))
    return page, status, {**headers, "Cache-Control": SHOW_AGAIN_ON_BACK}


@bp.app_template_filter()
def cents_as_euros(cents: int) -> str:
    return euros(cents)


@bp.post("/orders/<public_id>/refunds")
def create(public_id: str):
    token = form_tokens.submitted_token()  # malformed: 400, Redis untouched
    name = form_name(public_id)
    order = get_order_or_404(public_id)
    if placed_through_api(order):
        return through_the_api(order)
    if nothing_left(order) and request_taken(name, token):
        return to_order(order, REFUND_ALREADY)  # Back to the form of the refund that did it
    order = refundable_order_or_abort(public_id, order)
    form = RefundForm(refundable_cents(order))
    if not form.validate():
        if request_taken(name, token):
            return to_order(order, REFUND_ALREADY)
        return render_form(order, form, token=token, status=422)  # the token stays valid

    outcome = form_tokens.submit_once(
        name, token, sessions=sessions(),
        create=lambda db, digest: create_request(db, order, form.cents, digest),
        find=find_request, fingerprint=amount_fingerprint(form.cents),
        fingerprint_of=lambda requested: amount_fingerprint(requested.amount_cents),
    )
    match outcome:
        case Created(_):
            return to_order(order, REFUND_REQUESTED)
        case Duplicate(_):
            return to_order(order, REFUND_ALREADY)
        case Changed(requested):  # another amount on the same form: told, not merged
            return form_again(public_id, form,
                              CHANGED.format(amount=euros(requested.amount_cents)), 409)
        case Failed(Refused() as refused):
            return form_again(public_id, form, str(refused), 409)
        case Unconfirmed():
            # The connection died mid-transaction (a failover during COMMIT): the
            # request may exist. A fresh token would let the resubmit request the
            # amount twice; the same token, put back, lands on it or takes it once.
            return render_form(order, form, token=token, message=NOT_CONFIRMED, status=503,
                               headers={"Retry-After": "5"})
        case Failed(_) | Expired(waited=True):
            return form_again(public_id, form, NOT_QUEUED, 503)
        case Expired():
            return form_again(public_id, form, EXPIRED, 409)
        case StillRunning():
            return form_again(public_id, form, STILL_RUNNING, 503)


def to_order(order: Order, notice: str):
    """To the order's page, which says ``notice`` once (flashed, not in the URL); under
    htmx a full page load of it (``HX-Redirect``)."""
    notify(order.order_number, notice)
    url = url_for("orders.show", public_id=order.public_id)
    if request_kind() == "htmx":
        return Response("", 200, {"HX-Redirect": url})
    return redirect(url, 303)


def request_taken(name: str, token: str) -> bool:
    """Whether this very form's request exists: the resubmit after "could not
    confirm" of a request that did commit, which the amount check would otherwise
    refuse as more than is left. Its token, put back for that resubmit, is spent."""
    digest = form_tokens.digest(name, token)
    with sessions()() as db:
        if find_request(db, digest) is None:
            return False
    with suppress(RedisError):  # the answer is known whatever Redis says
        form_tokens.store.consume_digest(digest)
    return True


def amount_fingerprint(cents: int) -> str:
    """What makes a refund request what it is: its amount."""
    return fingerprint({"amount_cents": cents})


def create_request(db: Session, order: Order, cents: int, digest: str) -> Requested:
    """Record the request and reserve its amount, inside submit_once's transaction
    (the token is spent). What is left is checked again by the reserving UPDATE: a
    refund requested or applied since the form was validated makes this one too large."""
    try:
        request_refund(db, order.id, cents, digest)
    except NotEnoughLeft:
        raise Refused(NOT_ENOUGH_LEFT) from None
    return Requested(order.public_id, cents)


def form_again(public_id: str, form: RefundForm, message: str, status: int):
    """The order as it is now, the amount typed, a fresh token (the old one is
    spent) and why nothing was requested."""
    order = refundable_order_or_abort(public_id)
    form.left_cents = refundable_cents(order)
    return render_form(order, form, message=message, status=status)


def refundable_order_or_abort(public_id: str, order: Order | None = None) -> Order:
    """The order, or a 404; :class:`NothingToRefund` (409, saying why) if nothing can
    ever be refunded on it. An order whose rest is requested and not yet applied
    gets the form, which says so: a request may still fail and free the amount."""
    order = order or get_order_or_404(public_id)
    if nothing_left(order):
        raise NothingToRefund(order)
    return order


def render_form(order: Order, form: RefundForm, *, token: str | None = None,
                message: str | None = None, status: int = 200,
                headers: dict[str, str] | None = None):
    """The refund page with the amount typed; a fresh token unless one is given."""
    if token is None:
        token = form_tokens.issue(form_name(order.public_id))
    # htmx swaps the form alone, in place: an amount refused leaves no POST in history.
    template = "orders/_refund_form.html" if request_kind() == "htmx" else "orders/refund.html"
    return render_template(template, order=order, form=form, form_token=token,
                           message=message), status, headers or {}
