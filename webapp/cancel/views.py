"""Cancelling an order from its confirmation page.

The confirmation page links to ``GET /orders/<id>/cancel``, which asks "cancel
this order?" with a form that carries its own single-use token (bound to the
endpoint and the order's key). Issuing the token there, not on the confirmation
page, keeps viewing an order free of Redis writes and puts a confirmation step
before a destructive action. The submit is protected like the order form's
(``submit_once.form``), so a double click or a resubmit is one cancel; what a repeat
finds is the order's status, not a row. Whether the cancel *can* happen is the state
machine's call (:mod:`webapp.shop.order_states`): a cancelled order stays cancelled, a
shipped one is refused with the reason.

As for the order form, Back shows the cancel page as it was (``SHOW_AGAIN_ON_BACK``),
with its spent token: submitting it again lands on the order, "already cancelled".
That needs the form to post to another URL than the page's (a POST drops the
browser's copy of its URL), hence ``POST /orders/<id>/cancellation``; the old
``POST /orders/<id>/cancel`` still answers pages rendered before that change.
An order placed through the JSON API is cancelled through the API (403 here).
"""

from __future__ import annotations

import logging

from flask import Blueprint, abort, g, make_response, redirect, render_template, request, url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from flask_submit_once import Outcome, Refused

from ..extensions import submit_once
from ..shop.lookup import get_order_or_404
from ..shop.models import Order
from ..shop.notices import ALREADY_CANCELLED, CANCELLED, notify
from ..shop.order_rules import placed_through_api
from ..shop.order_states import TRANSITIONS, TransitionRefused, transition

bp = Blueprint("cancel", __name__)
log = logging.getLogger(__name__)

CANCELLABLE = TRANSITIONS["cancel"][0]
EXPIRED = "This cancel form expired. Go back to your order and press “Cancel order” again."
STILL_RUNNING = (
    "We are still cancelling your order. Press “Yes, cancel my order” again in "
    "a few seconds: it is never cancelled twice."
)
NOT_CONFIRMED = (
    "We could not confirm the cancel: our order system stopped answering while "
    "cancelling. Open your order in a few moments to see whether it is cancelled; "
    "pressing “Cancel order” again never cancels twice."
)
NOT_DONE = (
    "We could not cancel your order just now; nothing changed. Please try again in a few moments."
)


class NotCancellable(Refused):
    """The order's status does not allow a cancel; the message says why."""


def cancellable(order: Order) -> bool:
    """Whether the confirmation page offers "Cancel order" (no Redis involved)."""
    return order.status in CANCELLABLE and not placed_through_api(order)


@bp.get("/orders/<public_id>/cancel")
def confirm(public_id: str):
    """Ask before cancelling; the form gets a fresh single-use token."""
    order = get_order_or_404(public_id)
    if placed_through_api(order):
        return through_the_api(order)
    if order.status == "cancelled":
        # Back to this page after cancelling, when the browser has no copy of it: say
        # what happened, on the order, not "not cancelled".
        notify(order.order_number, ALREADY_CANCELLED)
        return redirect(url_for("orders.show", public_id=public_id), 303)
    if not cancellable(order):
        return refused_page(public_id, str(TransitionRefused("cancel", order.status)))
    # Back after the submit shows this page as it was, spent token and all.
    return render_template("orders/cancel.html", order=order)


def the_order() -> None:
    """Before any token is spent: the order, or its 404; an API client's order is
    refused (403). The cancel form has no fields: there is nothing to validate."""
    order = g.cancel_order = get_order_or_404((request.view_args or {})["public_id"])
    if placed_through_api(order):
        abort(make_response(through_the_api(order)))


def answer(outcome: Outcome):
    """Where each outcome leaves the customer: the order, with what happened to it."""
    order: Order = g.cancel_order
    match outcome:
        case Outcome(kind="created", result=True):
            notify(order.order_number, CANCELLED)
        case Outcome(kind="created" | "duplicate"):
            notify(order.order_number, ALREADY_CANCELLED)
        case Outcome(kind="refused"):
            # Shipped meanwhile: the cancel page says why, reached by a GET, so Back to
            # it later never asks to send the form again (a POST result would).
            return redirect(url_for(".confirm", public_id=order.public_id), 303)
        case Outcome(kind="expired"):
            return refused_page(order.public_id, EXPIRED)
        case Outcome(kind="unconfirmed"):
            # Lost mid-COMMIT: the cancel may have happened. Never "nothing changed";
            # a cancel is settled by the order's status, so pressing it again is safe.
            log.warning("cancel not confirmed: connection lost")
            abort(503, NOT_CONFIRMED)
        case Outcome(kind="failed", error=error):
            log.warning("cancel failed: %s", type(error).__name__)
            abort(503, NOT_DONE)
    return None


# Applied last, so url_for builds /cancellation: /cancel answers pages rendered before it.
@bp.post("/orders/<public_id>/cancel")
@bp.post("/orders/<public_id>/cancellation")
@submit_once.form(
    the_order,
    find=lambda db, _: cancelled(db, g.cancel_order.id),
    done="orders.show",
    on_outcome=answer,
    template="orders/cancel.html",
    context=lambda: {"order": g.cancel_order},
    messages={"still_running": STILL_RUNNING},
)
def cancel(_: None, db: Session, public_id: str) -> bool:
    """Cancel in the submit's transaction; False if it was already cancelled."""
    try:
        return transition(db, g.cancel_order.id, "cancel").changed
    except TransitionRefused as refused:
        raise NotCancellable(str(refused)) from refused


def cancelled(db: Session, order_id: int) -> bool | None:
    """What a repeat finds: True when the order is cancelled (by whichever submit)."""
    status = db.scalar(select(Order.status).where(Order.id == order_id))
    return True if status == "cancelled" else None


def refused_page(public_id: str, reason: str):
    return render_template("orders/cancel_refused.html", public_id=public_id, reason=reason), 409


def through_the_api(order: Order):
    """An order an API client placed is its client's to cancel, through the API: a
    403 saying so; nothing changed, no token issued or spent."""
    return render_template("orders/through_api.html", order=order, action="cancelled"), 403
