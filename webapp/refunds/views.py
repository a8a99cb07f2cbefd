"""The refund form on a paid order's page, and its once-only submit.

The submit does not refund: it spends the form's single-use token (same flow
as ordering, form name ``refund:<public_id>``) and appends a message to the
refund stream, keyed by the token's digest. The worker applies it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import Blueprint, abort, redirect, render_template, url_for
from redis.exceptions import RedisError
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order
from ..order_states import TRANSITIONS
from ..submission import Created, Duplicate, Expired, Failed, Refused, StillRunning
from .forms import RefundForm, euros
from .stream import RefundRequest, queue_refund, queued_order

bp = Blueprint("refunds", __name__, cli_group=None)
log = logging.getLogger(__name__)

REFUNDABLE = TRANSITIONS["refund"][0]
EXPIRED = "This form expired — please check the amount and submit again."
NOT_QUEUED = ("We could not take your refund request just now, so nothing was requested. "
              "Please submit again in a few moments.")
STILL_RUNNING = "Your first request is still being taken — reload this page in a few seconds."


class QueueUnavailable(Refused):
    """Redis did not take the message; nothing was requested."""


@dataclass
class RefundPanel:
    form: RefundForm
    token: str
    message: str | None = None


def form_name(public_id: str) -> str:
    return f"refund:{public_id}"


def left_to_refund(order: Order) -> int:
    return order.paid_cents - order.refunded_cents if order.status in REFUNDABLE else 0


@bp.app_template_global()
def refund_panel(order: Order) -> RefundPanel | None:
    """A fresh refund form for ``order``'s page, or None if nothing can be refunded."""
    if left_to_refund(order) <= 0:
        return None
    return RefundPanel(RefundForm(left_to_refund(order), formdata=None),
                       form_tokens.issue(form_name(order.public_id)))


@bp.app_template_filter()
def cents_as_euros(cents: int) -> str:
    return euros(cents)


@bp.post("/orders/<public_id>/refunds")
def create(public_id: str):
    token = form_tokens.submitted_token()  # malformed: 400, Redis untouched
    with sessions()() as db:
        order = db.scalar(select(Order).where(Order.public_id == public_id))
    if order is None:
        abort(404, "There is no order with this number.")
    if left_to_refund(order) <= 0:
        abort(409, f"This order cannot be refunded: it is {order.status}"
                   f"{' and fully refunded' if order.status in REFUNDABLE else ''}.")
    form = RefundForm(left_to_refund(order))
    if not form.validate():
        return render_order(order, RefundPanel(form, token), 422)  # the token stays valid

    name = form_name(public_id)
    outcome = form_tokens.submit_once(
        name, token, sessions=sessions(),
        create=lambda db, digest: request_refund(db, order, form.cents, digest),
        find=find_requested_order,
    )
    log.info("refund submit %s token=%s", type(outcome).__name__,
             form_tokens.digest(name, token)[:12])
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
        queue_refund(form_tokens.store.client,
                     RefundRequest(digest, order.id, cents, order.public_id))
    except RedisError as error:
        raise QueueUnavailable(NOT_QUEUED) from error
    return order.public_id


def find_requested_order(db: Session, digest: str) -> str | None:
    """The order an earlier submit of this token requested a refund for: applied
    (refund_records) or still queued (the mark written with the message)."""
    applied = db.scalar(text("SELECT o.public_id FROM refund_records r JOIN orders o "
                             "ON o.id = r.order_id WHERE r.idempotency_key = :key"),
                        {"key": digest})
    return applied or queued_order(form_tokens.store.client, digest)


def form_again(public_id: str, form: RefundForm, message: str, status: int):
    """The order as it is now, the amount typed, a fresh token (the old one is
    spent) and why nothing was requested."""
    with sessions()() as db:
        order = db.scalar(select(Order).where(Order.public_id == public_id))
    if order is None or left_to_refund(order) <= 0:
        abort(409, "Nothing was requested, and this order has nothing left to refund.")
    form.left_cents = left_to_refund(order)
    return render_order(order, RefundPanel(form, form_tokens.issue(form_name(public_id)),
                                           message), status)


def render_order(order: Order, panel: RefundPanel, status: int):
    return render_template("orders/show.html", order=order, already_placed=False,
                           refund=panel), status
