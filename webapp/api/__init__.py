"""The JSON API: idempotent orders, order cancel, and its OpenAPI document.

Errors anywhere under ``/api/`` and ``/webhooks/`` are problem+json
(:mod:`webapp.api.problems`); the HTML pages keep their error pages.
"""

from __future__ import annotations

from flask import Flask, Response, request

from submit_once.tokens import TokenStore

from .. import api_keys
from ..extensions import csrf
from . import openapi, orders
from .problems import ApiProblem

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
    # The claim for an Idempotency-Key lives as long as its result is replayed.
    app.extensions["api_claims"] = TokenStore(
        app.extensions["form_tokens"].store.client,
        ttl=int(app.config["IDEMPOTENCY_RETENTION"]), prefix="idem")
    csrf.exempt(orders.bp)  # bearer-key authenticated: no cookies, so no CSRF
    app.register_blueprint(orders.bp)
    app.register_blueprint(openapi.bp)
    app.register_error_handler(ApiProblem, lambda error: error.response())
    app.after_request(_no_store)
    api_keys.init_app(app)
