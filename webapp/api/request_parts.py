"""The parts of an API request that views check first: who is calling (bearer
API key), the Idempotency-Key header, and the JSON body. Each failure is the
problem a client can act on, raised before anything is claimed or written."""

from __future__ import annotations

from flask import request
from werkzeug.exceptions import BadRequest

from ..problems import ApiProblem
from .idempotency import parse_key
from .keys import authenticated_client

__all__ = ["UNAUTHORIZED", "idempotency_key", "json_body", "require_client"]

UNAUTHORIZED = (
    "Send 'Authorization: Bearer <API key>' with a key the shop gave you. "
    "If it was accepted before, it has expired or been revoked: ask the shop "
    "for a new one."
)


def require_client() -> int:
    """The calling client's id; 401 without a valid key. The partner is told what
    they can do (the shop's own commands are no use to them), and not which of
    missing, unknown, expired or revoked it was."""
    client = authenticated_client()
    if client is None:
        raise ApiProblem("unauthorized", UNAUTHORIZED)
    return client


def idempotency_key() -> str:
    """The request's Idempotency-Key; 400 if missing, repeated or malformed."""
    values = request.headers.getlist("Idempotency-Key")
    if not values:
        raise ApiProblem(
            "idempotency-key-missing",
            "Send an Idempotency-Key header: a unique "
            "value per order, the same on every retry of that order.",
        )
    key = parse_key(values[0]) if len(values) == 1 else None
    if key is None:
        raise ApiProblem(
            "idempotency-key-malformed",
            "Send one Idempotency-Key of 1 to 255 "
            'printable ASCII characters, bare or quoted ("...").',
        )
    return key


def json_body() -> object:
    """The parsed JSON body; 415 if not JSON, 400 if it does not parse."""
    if not request.is_json:
        raise ApiProblem("unsupported-media-type", "Send the body as application/json.")
    try:
        return request.get_json()
    except (BadRequest, RecursionError):
        raise ApiProblem("malformed-json", "The body could not be parsed as JSON.") from None
