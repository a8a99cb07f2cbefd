"""``POST /webhooks/payments``: the payment provider's events, each taking effect once.

The provider delivers at least once, sometimes twice, sometimes out of order:

    verify signature       bad -> 400, nothing read or recorded
    parse the event        bad -> 400/422
    once per event id      submit_once.idempotent: advisory lock, SET NX EX claim in
                           Redis (fast path), then one transaction: INSERT
                           payment_events (UNIQUE event_id) + the effect (payment:
                           the state machine; refund: a refund_records row, as the
                           refund worker writes); COMMIT; 200
      already applied      -> 200, no second effect
      not applicable yet   -> 409 (refund for an unpaid order): the provider retries

What an event does to its order is :mod:`.effect`'s: a payment that does not
match is recorded and answered 200 ("recorded"); an event naming the order any
other way than by its payment reference names no order (422).

Each event gets one log line that says what it did (paid, refunded, recorded as
a mismatch, ignored, duplicate, refused and why), naming the order by number.

The claim is given back whenever the transaction did not commit, so a retry of
a refused or failed event is processed afresh.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, current_app, g, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from flask_submit_once import Outcome

from ..extensions import submit_once
from ..problems import ApiProblem
from ..shop.models import PaymentEvent
from .effect import NAME, SCOPE, NotApplicableYet, Recorded, UnknownOrder, apply_event
from .event import EFFECTS, parse_event
from .signatures import HEADER, BadSignature, verify

bp = Blueprint("webhooks", __name__)
log = logging.getLogger(__name__)

RETRY = {"Retry-After": "5"}


@bp.post("/webhooks/payments")
def receive() -> Response:
    secret = current_app.config.get("PAYMENT_WEBHOOK_SECRET")
    if not secret:
        raise ApiProblem("unavailable", "Webhooks are off: PAYMENT_WEBHOOK_SECRET is not set.")
    body = request.get_data(cache=True)
    try:
        verify(secret, request.headers.get(HEADER), body)
    except BadSignature as bad:
        raise ApiProblem("bad-signature", f"Rejected: {bad}.") from None
    event = g.event = parse_event()
    # acknowledged, so the provider stops sending it
    if event.type not in EFFECTS:
        log.info("webhook %s %s: ignored, not an event that changes an order", event.id, event.type)
        return jsonify(event=event.id, result="ignored")
    return apply_once()


def applied(db: Session, _: str) -> PaymentEvent | None:
    """What a repeat of the event finds: its row (UNIQUE event id)."""
    return db.scalar(select(PaymentEvent).where(PaymentEvent.event_id == g.event.id))


def answer_for(result: Recorded | PaymentEvent) -> Response:
    """What the provider is told: what the event did; a repeat, that it was a duplicate."""
    event = g.event
    match result:
        case Recorded(status, None, number):
            # the request log names the order too, never its key
            g.order_number = number
            return jsonify(event=event.id, result="applied", order_status=status)
        case Recorded(status, problem, number):
            g.order_number = number
            return jsonify(event=event.id, result="recorded", problem=problem, order_status=status)
    return jsonify(event=event.id, result="duplicate")


def log_and_refuse(outcome: Outcome) -> None:
    """One log line a delivery, saying what it did; and the problem for what it did not."""
    event = g.event
    said = f"webhook {event.id} {event.type}"
    match outcome:
        case Outcome(kind="created", result=Recorded(status, None, number)):
            log.info("%s: %s order %s, now %s", said, APPLIED[event.type], number, status)
        case Outcome(kind="created", result=Recorded(status, problem, number)):
            log.warning(
                "%s: recorded %s on order %s (%s)", said, PROBLEM_WORDS[problem], number, status
            )
        case Outcome(kind="duplicate" | "changed"):
            log.info("%s: duplicate, applied before; nothing done", said)
        case Outcome(kind="still_running"):
            log.info("%s: another delivery of it is being applied; asked to retry", said)
            raise ApiProblem("request-in-progress", "This event is being applied.", headers=RETRY)
        case Outcome(kind="refused", error=NotApplicableYet() as refused):
            log.info("%s: not applicable yet (%s); asked to retry", said, refused)
            raise ApiProblem("event-out-of-order", str(refused), headers=RETRY)
        case Outcome(kind="refused", error=UnknownOrder()):
            # What it named is not logged: a provider still sending an order's key
            # (as before migration 0011) would put that key in the log.
            log.warning("%s: refused, no order has this payment reference", said)
            raise ApiProblem(
                "validation-error",
                "No order has this order_id: give the order's payment reference.",
                errors={"order_id": "unknown order"},
            )
        case Outcome(kind="failed", error=IntegrityError()):
            log.warning("%s: refused, the refund is more than was paid", said)
            raise ApiProblem(
                "validation-error",
                "The refund is more than was paid.",
                errors={"amount_cents": "more than paid"},
            )
        # a retry meets the UNIQUE event id if it landed
        case Outcome(kind="unconfirmed"):
            log.warning("%s: not confirmed whether it was applied; asked to retry", said)
            raise ApiProblem(
                "unavailable",
                "Could not confirm whether the event was applied; retry.",
                headers=RETRY,
            )
        # nothing claimed: the app's answer to an outage (errors.unavailable), as before
        # the library told its hook of it
        case Outcome(kind="unavailable"):
            log.warning("%s: not applied, a server did not answer; asked to retry", said)
        case _:
            log.warning("%s: not applied (%s); asked to retry", said, outcome.kind)
            raise ApiProblem("unavailable", "The event was not applied; retry.", headers=RETRY)


@submit_once.idempotent(
    key=lambda: g.event.id,
    scope=lambda: SCOPE,
    name=NAME,
    find=applied,
    respond=answer_for,
    on_outcome=log_and_refuse,
    fingerprint=lambda: g.event.id,
)
def apply_once(db: Session) -> Recorded:
    """The event's effect, once per event id (the claim is given back whenever the
    transaction did not commit, so a retry of a refused or failed event is processed
    afresh)."""
    return apply_event(db, g.event)


#: What an applied event did, and what a recorded one was recorded as, in the log.
APPLIED = {"payment.succeeded": "paid", "refund.succeeded": "refund applied to"}
PROBLEM_WORDS = {
    "amount_mismatch": "as an amount mismatch, not paid",
    "currency_mismatch": "as a currency mismatch, not paid",
    "order_closed": "on a refunded order, money kept for payments reconcile",
    "after_cancel": "after the cancel, refundable",
    "extra_payment": "as an extra payment, refundable",
}
