"""The JSON order API: place an order once per Idempotency-Key, read it, cancel it.

``POST /api/orders`` is ``submit_once.idempotent``: authenticate → key → (advisory lock,
``SET NX EX`` claim, one transaction: the body validated, the order placed) → answer.
A repeat is the first answer again (``Idempotent-Replayed``); a 422 or a failure gives
the key back, so the client may fix the body and retry with it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from flask import Blueprint, Response, current_app, g, jsonify, url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from flask_submit_once import Outcome

from ..db import sessions
from ..extensions import submit_once
from ..problems import ApiProblem
from ..shop.models import Order
from ..shop.order_rules import is_public_id
from ..shop.order_states import TransitionRefused, transition
from ..shop.placing import OrderDetails, PriceChanged, new_order
from .idempotency import expires_at, http_date
from .request_parts import idempotency_key, json_body, require_client
from .schemas import order_json, validate_order

bp = Blueprint("api", __name__, url_prefix="/api")
log = logging.getLogger(__name__)

#: What an idempotency key's digest is bound to, besides the client (the name keys had
#: before the decorator: a retry of a key used then finds its order).
FORM = "api:orders"
IN_PROGRESS = "A request with this Idempotency-Key has not finished yet. Retry shortly."


def the_client() -> str:
    """Whose keys these are: the authenticated client (401 before anything else)."""
    g.api_client = require_client()
    return f"client:{g.api_client}"


def api_answer(outcome: Outcome) -> Response | None:
    """The API's problems for what did not place an order, and a replay's expiry."""
    log.info("api order %s", outcome.kind)
    match outcome:
        case Outcome(kind="duplicate", result=order) if expires_at(
            order.created_at, retention()
        ) <= datetime.now(UTC):
            raise ApiProblem(
                "idempotency-key-expired",
                "This key's result is no longer kept. Use a new key for a new request.",
            )
        case Outcome(kind="changed"):
            raise ApiProblem(
                "idempotency-key-reused",
                "This key was first used with a "
                "different body, method or path. Use a new key for a new request.",
            )
        case Outcome(kind="still_running"):
            raise ApiProblem("request-in-progress", IN_PROGRESS, headers={"Retry-After": "1"})
        case Outcome(kind="refused", error=PriceChanged() as changed):
            raise ApiProblem(
                "price-changed",
                f"The product now costs {changed.price_cents} cents a unit, not "
                "expected_unit_price_cents; nothing was placed.",
                unit_price_cents=changed.price_cents,
            )
        case Outcome(kind="refused"):
            raise ApiProblem(
                "validation-error",
                "Fix the fields listed in errors.",
                errors={"product": "This product just went off sale."},
            )
        case Outcome(kind="failed", error=error):
            log.warning("api order not placed: %s", type(error).__name__)
            raise ApiProblem(
                "unavailable",
                "Nothing was placed. Retry with the same key.",
                headers={"Retry-After": "5"},
            )
        case Outcome(kind="unconfirmed"):
            # The COMMIT may have landed: the claim stays, so a retry with the same
            # key finds the order (a replay) or, finding none, places it afresh.
            log.warning("api order unconfirmed: the database connection died at COMMIT")
            raise ApiProblem(
                "unavailable",
                "We could not confirm whether the order was "
                "placed. Retry with the same key: it is placed once or "
                "replayed.",
                headers={"Retry-After": "5"},
            )
    return None


def result_response(order: Order) -> Response:
    """The answer to the request that placed ``order``, as it was: what a retry gets."""
    response = jsonify(order.api_response)
    response.status_code = 201
    response.headers["Location"] = url_for("api.show_order", public_id=order.public_id)
    response.headers["Idempotency-Key-Expires"] = http_date(
        expires_at(order.created_at, retention())
    )
    return response


@bp.post("/orders")
@submit_once.idempotent(
    key=idempotency_key,
    scope=the_client,
    model=Order,
    respond=result_response,
    on_outcome=api_answer,
    wait=0,
    name=FORM,
)
def create_order(db: Session) -> Order:
    """Place the order the body asks for, once per Idempotency-Key: a 422 gives the key
    back, so the client may fix the body and retry with it."""
    order_request, errors = validate_order(db, json_body())
    if order_request is None:
        raise ApiProblem("validation-error", "Fix the fields listed in errors.", errors=errors)
    fields = order_request.model_dump()
    shown = fields.pop("expected_unit_price_cents")
    order = new_order(
        db,
        OrderDetails(**fields, shown_unit_price_cents=shown),
        api_client_id=g.api_client,
        idempotency_key=idempotency_key(),
    )
    order.api_response = order_json(order)
    return order


@bp.get("/orders/<public_id>")
def show_order(public_id: str) -> Response:
    client = require_client()
    with sessions()() as db:
        return jsonify(order_json(own_order(db, client, public_id)))


@bp.post("/orders/<public_id>/cancel")
def cancel_order(public_id: str) -> Response:
    """Idempotent by the state machine: cancelling a cancelled order is a 200.
    An Idempotency-Key, if sent, is accepted and not needed."""
    client = require_client()
    with sessions()() as db:
        order = own_order(db, client, public_id)
        try:
            transition(db, order.id, "cancel")
            db.commit()
        except TransitionRefused as refused:
            raise ApiProblem(
                "order-state-conflict", str(refused), order_status=refused.status
            ) from None
        db.refresh(order)
        return jsonify(order_json(order))


def own_order(db: Session, client: int, public_id: str) -> Order:
    """The client's order with this id; another client's orders do not exist for it."""
    order = None
    if is_public_id(public_id):
        order = db.scalar(
            select(Order).where(Order.public_id == public_id, Order.api_client_id == client)
        )
    if order is None:
        raise ApiProblem("not-found", "You have no order with this id.")
    return order


def retention() -> int:
    return int(current_app.config["IDEMPOTENCY_RETENTION"])
