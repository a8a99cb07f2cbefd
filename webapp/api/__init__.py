"""The JSON API: idempotent orders, order cancel, and its OpenAPI document.

    orders.py         the blueprint: POST /api/orders, GET and cancel an order
    schemas.py        request and response bodies (pydantic)
    openapi.py        GET /api/openapi.json, built from schemas.py
    request_parts.py  API key, Idempotency-Key and JSON body, checked first
    idempotency.py    the Idempotency-Key header's rules and the fingerprint
    keys.py           bearer API keys: made, looked up, revoked or expired
    key_commands.py   ``flask api-keys create``, ``api-keys list``, ``api-keys revoke``

Errors anywhere under ``/api/`` and ``/webhooks/`` are problem+json
(:mod:`webapp.problems`); the HTML pages keep their error pages.
"""

from __future__ import annotations

from flask import Flask, Response, request

from ..extensions import csrf
from ..problems import ApiProblem
from . import key_commands, openapi, orders

__all__ = ["init_app", "wants_problem"]

JSON_PREFIXES = ("/api/", "/webhooks/")


def wants_problem() -> bool:
    """Whether this request's errors are answered as problem+json."""
    return request.path.startswith(JSON_PREFIXES)


def _no_store(response: Response) -> Response:
    # Orders carry personal details and replays must come from us, not a cache.
    if wants_problem():
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def init_app(app: Flask) -> None:
    app.config.setdefault("IDEMPOTENCY_RETENTION", 86400)
    if int(app.config["IDEMPOTENCY_RETENTION"]) < 1:
        raise RuntimeError("IDEMPOTENCY_RETENTION must be at least 1 second.")
    # bearer-key authenticated: no cookies, so no CSRF
    csrf.exempt(orders.bp)
    app.register_blueprint(orders.bp)
    app.register_blueprint(openapi.bp)
    app.register_error_handler(ApiProblem, lambda error: error.response())
    app.after_request(_no_store)
    key_commands.init_app(app)
