"""Cancelling an order from its confirmation page.

The confirmation page links to ``GET /orders/<id>/cancel``, which asks "cancel
this order?" with a form that carries its own single-use token (form name
``cancel:<public_id>``). Issuing the token there, not on the confirmation
page, keeps viewing an order free of Redis writes and puts a confirmation step
before a destructive action. The form is submitted through the same
:func:`submit_once` as the order form, so a double click or a resubmit is one
cancel. Whether the cancel *can* happen is the state machine's call (:mod:`webapp.order_states`): a
cancelled order stays cancelled, a shipped one is refused with the reason.

As for the order form, Back shows the cancel page as it was (``SHOW_AGAIN_ON_BACK``),
with its spent token: submitting it again lands on the order, "already cancelled".
That needs the form to post to another URL than the page's (a POST drops the
browser's copy of its URL), hence ``POST /orders/<id>/cancellation``; the old
``POST /orders/<id>/cancel`` still answers pages rendered before that change.
An order placed through the JSON API is cancelled through the API (403 here).
"""

from __future__ import annotations

import logging

from flask import Blueprint, abort, redirect, render_template, url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from submit_once import (
    SHOW_AGAIN_ON_BACK,
    Created,
    Duplicate,
    Expired,
    Failed,
    Refused,
    StillRunning,
    Unconfirmed,
)

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order
from ..notices import ALREADY_CANCELLED, CANCELLED, notify
from ..order_rules import placed_through_api
from ..order_states import TRANSITIONS, TransitionRefused, transition
from ..orders.lookup import get_order_or_404

bp = Blueprint("cancel", __name__)
log = logging.getLogger(__name__)

CANCELLABLE = TRANSITIONS["cancel"][0]
EXPIRED = "This cancel form expired. Go back to your order and press “Cancel order” again."


class NotCancellable(Refused):
    """The order's status does not allow a cancel; the message says why."""


def form_name(public_id: str) -> str:
    return f"cancel:{public_id}"


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
    token = form_tokens.issue(form_name(public_id))
    # Back after the submit shows this page as it was, spent token and all.
    return render_template("orders/cancel.html", order=order, form_token=token), 200, {
        "Cache-Control": SHOW_AGAIN_ON_BACK}


# Applied last, so url_for builds /cancellation: /cancel answers pages rendered before it.
@bp.post("/orders/<public_id>/cancel")
@bp.post("/orders/<public_id>/cancellation")
def cancel(public_id: str):
    token = form_tokens.submitted_token()  # malformed: 400, Redis untouched
    order = get_order_or_404(public_id)
    if placed_through_api(order):
        return through_the_api(order)
    order_id, number = order.id, order.order_number

    outcome = form_tokens.submit_once(
        form_name(public_id), token, sessions=sessions(),
        create=lambda db, _: cancel_order(db, order_id),
        find=lambda db, _: status_if_cancelled(db, order_id),
    )
    show = url_for("orders.show", public_id=public_id)
    match outcome:
        case Created(True):
            notify(number, CANCELLED)
            return redirect(show, 303)
        case Created(False) | Duplicate():
            notify(number, ALREADY_CANCELLED)
            return redirect(show, 303)
        case Failed(NotCancellable()):
            # Shipped meanwhile: the cancel page says why, reached by a GET, so Back to
            # it later never asks to send the form again (a POST result would).
            return redirect(url_for(".confirm", public_id=public_id), 303)
        case Expired():
            with sessions()() as db:
                if status_if_cancelled(db, order_id):
                    notify(number, ALREADY_CANCELLED)
                    return redirect(show, 303)
            return refused_page(public_id, EXPIRED)
        case StillRunning():
            return render_template("orders/still_running.html"), 503, {"Retry-After": "2"}
        case Unconfirmed():
            # Lost mid-COMMIT: the cancel may have happened. Never "nothing changed";
            # a cancel is settled by the order's status, so pressing it again is safe.
            log.warning("cancel not confirmed: connection lost")
            abort(503, "We could not confirm the cancel: our order system stopped answering "
                       "while cancelling. Open your order in a few moments to see whether it "
                       "is cancelled; pressing “Cancel order” again never cancels twice.")
        case Failed(error):
            log.warning("cancel failed: %s", type(error).__name__)
            abort(503, "We could not cancel your order just now; nothing changed. "
                       "Please try again in a few moments.")


def cancel_order(db: Session, order_id: int) -> bool:
    """Cancel in the caller's transaction; False if it was already cancelled."""
    try:
        return transition(db, order_id, "cancel").changed
    except TransitionRefused as refused:
        raise NotCancellable(str(refused)) from refused


def status_if_cancelled(db: Session, order_id: int) -> str | None:
    status = db.scalar(select(Order.status).where(Order.id == order_id))
    return status if status == "cancelled" else None


def refused_page(public_id: str, reason: str):
    return render_template("orders/cancel_refused.html", public_id=public_id,
                           reason=reason), 409


def through_the_api(order: Order):
    """An order an API client placed is its client's to cancel, through the API: a
    403 saying so; nothing changed, no token issued or spent."""
    return render_template("orders/through_api.html", order=order, action="cancelled"), 403

