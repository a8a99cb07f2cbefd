"""Requesting a refund for a paid order, once.

The confirmation page links to ``GET /orders/<id>/refund``: a form with its own
single-use token (form name ``refund:<public_id>``). Issuing the token there,
not on the confirmation page, keeps viewing an order free of Redis writes, as
for Cancel. The submit spends the token through the same ``submit_once`` as
ordering and does not refund: it appends a message keyed by the token's digest
to the refund stream, and the worker applies it.
"""

from __future__ import annotations

from flask import Blueprint, abort, redirect, render_template, url_for
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from submit_once.runner import Created, Duplicate, Expired, Failed, Refused, StillRunning

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order, RefundRecord
from ..order_rules import get_order_or_404
from ..order_states import TRANSITIONS
from .forms import RefundForm, euros
from .stream import RefundRequest, queue_refund, queued_order

bp = Blueprint("refunds", __name__, cli_group=None)

REFUNDABLE = TRANSITIONS["refund"][0]
EXPIRED = "This form expired — please check the amount and submit again."
NOT_QUEUED = ("We could not take your refund request just now, so nothing was requested. "
              "Please submit again in a few moments.")
STILL_RUNNING = "Your first request is still being taken — reload this page in a few seconds."


class QueueUnavailable(Refused):
    """Redis did not take the message; nothing was requested."""


def form_name(public_id: str) -> str:
    return f"refund:{public_id}"


@bp.app_template_global()
def refundable_cents(order: Order) -> int:
    """What is left to refund on ``order``: 0 unless it is paid, shipped or cancelled."""
    return order.paid_cents - order.refunded_cents if order.status in REFUNDABLE else 0


@bp.get("/orders/<public_id>/refund")
def new(public_id: str):
    """The refund form, with a fresh single-use token."""
    order = refundable_order_or_abort(public_id)
    return render_form(order, RefundForm(refundable_cents(order), formdata=None))


@bp.app_template_filter()
def cents_as_euros(cents: int) -> str:
    return euros(cents)


@bp.post("/orders/<public_id>/refunds")
def create(public_id: str):
    token = form_tokens.submitted_token()  # malformed: 400, Redis untouched
    order = refundable_order_or_abort(public_id)
    form = RefundForm(refundable_cents(order))
    if not form.validate():
        return render_form(order, form, token=token, status=422)  # the token stays valid

    name = form_name(public_id)
    outcome = form_tokens.submit_once(
        name, token, sessions=sessions(),
        create=lambda db, digest: request_refund(db, order, form.cents, digest),
        find=find_requested_order,
    )
    match outcome:
        case Created(_):
            return redirect(url_for("orders.show", public_id=public_id, refund="requested"), 303)
        case Duplicate(_):
            return redirect(url_for("orders.show", public_id=public_id, refund="already"), 303)
        case Failed(QueueUnavailable()):
            return form_again(public_id, form, NOT_QUEUED, 503)
        case Failed(Refused() as refused):
            return form_again(public_id, form, str(refused), 409)
        case Failed(_) | Expired(waited=True):
            return form_again(public_id, form, NOT_QUEUED, 503)
        case Expired():
            return form_again(public_id, form, EXPIRED, 409)
        case StillRunning():
            return form_again(public_id, form, STILL_RUNNING, 503)


def request_refund(db: Session, order: Order, cents: int, digest: str) -> str:
    """Queue the refund, inside submit_once's transaction (the token is spent).

    What is left is read again: a refund applied since the form was validated
    makes this one too large. The worker's CHECK is the real guarantee; this
    tells the user now instead of dead-lettering later.
    """
    left = db.scalar(select(Order.paid_cents - Order.refunded_cents)
                     .where(Order.id == order.id, Order.status.in_(REFUNDABLE)))
    if left is None or cents > left:
        raise Refused("Nothing was requested: the amount is more than is left to refund. "
                      "Please check it and submit again.")
    try:
        queue_refund(form_tokens.redis,
                     RefundRequest(digest, order.id, cents, order.public_id))
    except RedisError as error:
        raise QueueUnavailable(NOT_QUEUED) from error
    return order.public_id


def find_requested_order(db: Session, digest: str) -> str | None:
    """The order an earlier submit of this token requested a refund for: applied
    (refund_records) or still queued (the mark written with the message)."""
    applied = db.scalar(select(Order.public_id).join(RefundRecord)
                        .where(RefundRecord.idempotency_key == digest))
    return applied or queued_order(form_tokens.redis, digest)


def form_again(public_id: str, form: RefundForm, message: str, status: int):
    """The order as it is now, the amount typed, a fresh token (the old one is
    spent) and why nothing was requested."""
    order = refundable_order_or_abort(public_id)
    form.left_cents = refundable_cents(order)
    return render_form(order, form, message=message, status=status)


def refundable_order_or_abort(public_id: str) -> Order:
    """The order, or a 404; a 409 saying why if nothing can be refunded on it."""
    order = get_order_or_404(public_id)
    if refundable_cents(order) <= 0:
        why = ("nothing was paid" if order.paid_cents == 0 else "it is fully refunded"
               if order.status in REFUNDABLE else f"it is {order.status}")
        abort(409, f"Nothing can be refunded on this order: {why}.")
    return order


def render_form(order: Order, form: RefundForm, *, token: str | None = None,
                message: str | None = None, status: int = 200):
    """The refund page with the amount typed; a fresh token unless one is given."""
    if token is None:
        token = form_tokens.issue(form_name(order.public_id))
    return render_template("orders/refund.html", order=order, form=form, form_token=token,
                           message=message), status
