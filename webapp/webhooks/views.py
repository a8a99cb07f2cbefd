"""``POST /webhooks/payments``: the payment provider's events, each taking effect once.

The provider delivers at least once, sometimes twice, sometimes out of order:

    verify signature       bad -> 400, nothing read or recorded
    parse the event        bad -> 400/422
    run_once(event id):    advisory lock, SET NX EX claim in Redis (fast path), then
                           one transaction: INSERT payment_events (UNIQUE event_id)
                           + the effect (payment: the state machine; refund:
                           a refund_records row, as the refund worker writes); COMMIT; 200
      already applied      -> 200, no second effect
      not applicable yet   -> 409 (refund for an unpaid order): the provider retries

The claim is given back whenever the transaction did not commit, so a retry of
a refused or failed event is processed afresh.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from submit_once.runner import Created, Duplicate, Expired, Failed, Refused, StillRunning, run_once
from submit_once.tokens import TokenStore

from ..api.problems import ApiProblem
from ..db import sessions
from ..extensions import form_tokens
from ..models import Order, PaymentEvent
from ..order_states import TransitionRefused, transition
from ..refunds.effect import record_refund
from .event import EFFECTS, parse_event
from .event import PaymentEvent as Event
from .signatures import HEADER, BadSignature, verify

bp = Blueprint("webhooks", __name__)
log = logging.getLogger(__name__)

SCOPE = {"session_id": "provider", "form": "webhook:payments"}
RETRY = {"Retry-After": "5"}


class UnknownOrder(Refused):
    """The event names an order we do not have."""


class NotApplicableYet(Refused):
    """The order's status does not allow the event's effect (yet)."""


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
    event = parse_event()
    if event.type not in EFFECTS:  # acknowledged, so the provider stops sending it
        return jsonify(event=event.id, result="ignored")

    claims = event_claims()
    outcome = run_once(
        digest=claims.digest(event.id, **SCOPE), take=lambda: claims.claim(event.id, **SCOPE),
        sessions=sessions(), create=lambda db, _: apply_event(db, event),
        find=lambda db, _: db.scalar(select(PaymentEvent.type)
                                     .where(PaymentEvent.event_id == event.id)),
        wait=float(current_app.config["FORM_TOKENS_WAIT_SECONDS"]),
    )
    log.info("webhook %s %s", event.type, type(outcome).__name__)
    match outcome:
        case Created(status):
            return jsonify(event=event.id, result="applied", order_status=status)
        case Duplicate():
            return jsonify(event=event.id, result="duplicate")
        case StillRunning():
            raise ApiProblem("request-in-progress", "This event is being applied.", headers=RETRY)
    claims.release(event.id, **SCOPE)  # not committed: a retry must be processed afresh
    match outcome:
        case Failed(NotApplicableYet() as refused):
            raise ApiProblem("event-out-of-order", str(refused), headers=RETRY)
        case Failed(UnknownOrder()):
            raise ApiProblem("validation-error", "No order has this order_id.",
                             errors={"order_id": "unknown order"})
        case Failed(IntegrityError()):
            raise ApiProblem("validation-error", "The refund is more than was paid.",
                             errors={"amount_cents": "more than paid"})
        case Expired():
            raise ApiProblem("request-in-progress", "An earlier delivery of this event did "
                             "not finish; retry.", headers=RETRY)
        case _:
            raise ApiProblem("unavailable", "The event was not applied; retry.", headers=RETRY)


def apply_event(db: Session, event: Event) -> str:
    """Record the event and apply its effect in the caller's transaction; the
    order's status after it. The event row goes first: if Redis forgot the
    event, its UNIQUE id stops the effect before it is attempted."""
    order_id = db.scalar(select(Order.id).where(Order.public_id == event.order_id))
    if order_id is None:
        raise UnknownOrder(event.order_id)
    db.add(PaymentEvent(event_id=event.id, type=event.type, order_id=order_id,
                        amount_cents=event.amount_cents))
    db.flush()
    if event.type == "refund.succeeded":
        # A refund made at the provider: recorded like the refund worker's, in
        # refund_records with the amount added, so the two always reconcile.
        applied = record_refund(db.connection(), key=claims_digest(event.id),
                                order_id=order_id, amount_cents=event.amount_cents,
                                source="webhook")
        if applied is None:
            status = db.scalar(select(Order.status).where(Order.id == order_id))
            raise NotApplicableYet(str(TransitionRefused("refund", status)))
        return applied.status
    try:
        return transition(db, order_id, "pay", paid_cents=event.amount_cents).status
    except TransitionRefused as refused:
        raise NotApplicableYet(str(refused)) from refused


def claims_digest(event_id: str) -> str:
    """The event's 43-character digest, as refund_records wants its key."""
    return TokenStore.digest(event_id, **SCOPE)


def event_claims() -> TokenStore:
    """Claims on event ids, in the app's Redis (fast path; the UNIQUE event id
    in payment_events is the guarantee)."""
    return TokenStore(form_tokens.redis, ttl=int(current_app.config["WEBHOOK_CLAIM_TTL"]),
                      prefix="wh")
