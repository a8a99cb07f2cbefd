"""The JSON order API: place an order once per Idempotency-Key, read it, cancel it.

``POST /api/orders`` reads top to bottom like the HTML submit: authenticate →
key → body → validate → :func:`run_once` (advisory lock, ``SET NX EX`` claim,
one transaction) → answer. Validation happens before the claim, so a 422 never
pins the key; a failure after the claim gives the key back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Blueprint, Response, current_app, jsonify, request, url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from submit_once import (
    Created,
    Duplicate,
    Expired,
    Failed,
    Refused,
    StillRunning,
    TokenStore,
    Unconfirmed,
    run_once,
)

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order
from ..order_rules import is_public_id
from ..order_states import TransitionRefused, transition
from ..placing import OrderDetails, new_order
from ..problems import ApiProblem
from .idempotency import expires_at, fingerprint, http_date
from .request_parts import idempotency_key, json_body, require_client
from .schemas import OrderRequest, order_json, validate_order

bp = Blueprint("api", __name__, url_prefix="/api")
log = logging.getLogger(__name__)

#: What an idempotency key's digest is bound to, besides the client.
FORM = "api:orders"
IN_PROGRESS = "A request with this Idempotency-Key has not finished yet. Retry shortly."


@dataclass(frozen=True)
class StoredResult:
    """What the first request with a key committed, to be replayed to retries."""
    public_id: str
    fingerprint: str
    response: dict
    created_at: datetime


@bp.post("/orders")
def create_order() -> Response:
    client = require_client()
    key = idempotency_key()
    body = json_body()
    with sessions()() as db:
        order_request, errors = validate_order(db, body)
    if order_request is None:  # before the claim: the client may fix and retry with the key
        raise ApiProblem("validation-error", "Fix the fields listed in errors.", errors=errors)
    request_fingerprint = fingerprint(request.method, request.path, body)
    claims = idempotency_claims()
    scope = {"session_id": f"client:{client}", "form": FORM}
    digest = claims.digest(key, **scope)

    outcome = run_once(
        digest=digest, take=lambda: claims.claim(key, **scope), sessions=sessions(),
        create=lambda db, d: place_api_order(db, order_request, client, key,
                                             request_fingerprint, d),
        find=find_result, wait=0,
        sender=current_app._get_current_object(),  # the signals' sender, as for forms
    )
    log.info("api order %s key=%s", type(outcome).__name__, digest[:12])
    match outcome:
        case Created(result):
            return result_response(result)
        case Duplicate(result):
            return replay(result, request_fingerprint)
        case StillRunning():
            raise ApiProblem("request-in-progress", IN_PROGRESS, headers={"Retry-After": "1"})
        case Expired():
            # The claim is there but no order and no one holds the lock: the
            # request that claimed it died before giving it back. Give it back.
            claims.release(key, **scope)
            raise ApiProblem("request-in-progress", IN_PROGRESS, headers={"Retry-After": "1"})
        case Failed(Refused()):
            claims.release(key, **scope)
            raise ApiProblem("validation-error", "Fix the fields listed in errors.",
                             errors={"product": "This product just went off sale."})
        case Failed(error):
            claims.release(key, **scope)
            log.warning("api order not placed: %s", type(error).__name__)
            raise ApiProblem("unavailable", "Nothing was placed. Retry with the same key.",
                             headers={"Retry-After": "5"})
        case Unconfirmed():
            # The COMMIT may have landed: the claim stays, so a retry with the same
            # key finds the order (a replay) or, finding none, places it afresh.
            log.warning("api order unconfirmed: the database connection died at COMMIT")
            raise ApiProblem("unavailable", "We could not confirm whether the order was "
                             "placed. Retry with the same key: it is placed once or "
                             "replayed.", headers={"Retry-After": "5"})


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
            raise ApiProblem("order-state-conflict", str(refused),
                             order_status=refused.status) from None
        db.refresh(order)
        return jsonify(order_json(order))


def place_api_order(db: Session, order_request: OrderRequest, client: int, key: str,
                    request_fingerprint: str, digest: str) -> StoredResult:
    """Insert the order (:func:`webapp.placing.new_order`) and the response a retry
    will get, in the caller's transaction."""
    order = new_order(db, OrderDetails(**order_request.model_dump()), digest,
                      api_client_id=client, idempotency_key=key,
                      request_fingerprint=request_fingerprint)
    order.api_response = order_json(order)
    db.flush()
    return _stored(order)


def find_result(db: Session, digest: str) -> StoredResult | None:
    order = db.scalar(select(Order).where(Order.submission_digest == digest,
                                          Order.api_client_id.is_not(None)))
    return _stored(order) if order is not None else None


def _stored(order: Order) -> StoredResult:
    return StoredResult(order.public_id, order.request_fingerprint or "",
                        order.api_response or {}, order.created_at)


def replay(result: StoredResult, request_fingerprint: str) -> Response:
    if result.fingerprint != request_fingerprint:
        raise ApiProblem("idempotency-key-reused", "This key was first used with a different "
                         "body, method or path. Use a new key for a new request.")
    if expires_at(result.created_at, retention()) <= datetime.now(UTC):
        raise ApiProblem("idempotency-key-expired", "This key's result is no longer kept. "
                         "Use a new key for a new request.")
    response = result_response(result)
    response.headers["Idempotent-Replayed"] = "true"
    return response


def result_response(result: StoredResult) -> Response:
    response = jsonify(result.response)
    response.status_code = 201
    response.headers["Location"] = url_for("api.show_order", public_id=result.public_id)
    response.headers["Idempotency-Key-Expires"] = http_date(
        expires_at(result.created_at, retention()))
    return response


def own_order(db: Session, client: int, public_id: str) -> Order:
    """The client's order with this id; another client's orders do not exist for it."""
    order = None
    if is_public_id(public_id):
        order = db.scalar(select(Order).where(Order.public_id == public_id,
                                              Order.api_client_id == client))
    if order is None:
        raise ApiProblem("not-found", "You have no order with this id.")
    return order


def retention() -> int:
    return int(current_app.config["IDEMPOTENCY_RETENTION"])


#: Where the app keeps its store of claims on Idempotency-Keys.
CLAIMS = "idempotency_claims"


def idempotency_claims() -> TokenStore:
    """This app's claims on Idempotency-Keys: one store for the app's life, made at its
    first use on the app's one Redis client (so the order of init_app calls carries no
    meaning). A claim lives as long as its result is replayed."""
    store: TokenStore | None = current_app.extensions.get(CLAIMS)
    if store is None:
        store = current_app.extensions.setdefault(CLAIMS, TokenStore(
            form_tokens.redis, ttl=retention(), prefix="idem"))
    return store
