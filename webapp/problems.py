"""Errors as ``application/problem+json`` (RFC 9457), one stable ``type`` per case,
for the JSON API and the payment webhook alike.

A client branches on ``type``; ``title`` is its fixed human name and ``detail``
says what happened this time. The types are listed in the OpenAPI document. A JSON
body that does not validate gets one plain message per field (:func:`field_errors`).
"""

from __future__ import annotations

from typing import Any

from flask import Response, json
from pydantic import AfterValidator, BeforeValidator, ValidationError
from pydantic_core import PydanticCustomError
from werkzeug.exceptions import HTTPException

from .shop.order_rules import has_control_chars

__all__ = [
    "NOT_AN_OBJECT",
    "PROBLEMS",
    "ApiProblem",
    "field_errors",
    "printable",
    "problem",
    "whole_number",
    "problem_for_http_error",
    "problem_type",
]

#: slug -> (status, title). Slugs are part of the API: never rename one.
PROBLEMS: dict[str, tuple[int, str]] = {
    "bad-request": (400, "The request could not be understood"),
    "malformed-json": (400, "The body is not valid JSON"),
    "idempotency-key-missing": (400, "This request needs an Idempotency-Key header"),
    "idempotency-key-malformed": (400, "The Idempotency-Key header is malformed"),
    "bad-signature": (400, "The webhook signature is missing, wrong or too old"),
    "unauthorized": (401, "A valid API key is required"),
    "not-found": (404, "Not found"),
    "method-not-allowed": (405, "Method not allowed"),
    "request-in-progress": (409, "A request with this Idempotency-Key is still being processed"),
    "order-state-conflict": (409, "The order is not in a state that allows this"),
    "event-out-of-order": (409, "The event cannot be applied to the order yet"),
    "price-changed": (409, "The product no longer costs the price expected"),
    "payload-too-large": (413, "The request body is too large"),
    "unsupported-media-type": (415, "The body must be application/json"),
    "validation-error": (422, "The request body has invalid fields"),
    "idempotency-key-reused": (422, "This Idempotency-Key was used for a different request"),
    "idempotency-key-expired": (422, "This Idempotency-Key is past its retention period"),
    "unavailable": (503, "The service is briefly unavailable"),
    "server-error": (500, "Internal server error"),
}

_FOR_STATUS = {
    400: "bad-request",
    401: "unauthorized",
    404: "not-found",
    405: "method-not-allowed",
    413: "payload-too-large",
    415: "unsupported-media-type",
    503: "unavailable",
}


def problem_type(slug: str) -> str:
    """The ``type`` URI of a problem (a relative reference, as RFC 9457 allows)."""
    return f"/api/problems/{slug}"


def problem(
    slug: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    status: int | None = None,
    **extra: Any,
) -> Response:
    """A problem+json response for ``slug`` with this ``detail``."""
    default_status, title = PROBLEMS[slug]
    status = status or default_status
    body = {"type": problem_type(slug), "title": title, "status": status, "detail": detail, **extra}
    response = Response(json.dumps(body), status, mimetype="application/problem+json")
    response.headers.update(headers or {})
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


class ApiProblem(Exception):
    """Raise from a view to answer with :func:`problem`."""

    def __init__(self, slug: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.slug, self.detail, self.extra = slug, detail, extra

    def response(self) -> Response:
        return problem(self.slug, self.detail, **self.extra)


def problem_for_http_error(error: HTTPException) -> Response:
    """Werkzeug's errors (routing 404/405, 413, ...) as problems, status kept."""
    code = error.code or 500
    slug = _FOR_STATUS.get(code, "server-error" if code >= 500 else "bad-request")
    response = problem(slug, error.description or PROBLEMS[slug][1], status=code)
    allowed = getattr(error, "valid_methods", None)
    if allowed:
        response.headers["Allow"] = ", ".join(allowed)
    return response


NOT_AN_OBJECT = "The body must be a JSON object."


def whole_number() -> BeforeValidator:
    """Takes ``2.0`` as 2: JSON Schema's "integer" is any number without a fraction, and
    the document says "integer". Other floats, ``true`` and ``"2"`` stay refused."""

    def whole(value: object) -> object:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    return BeforeValidator(whole)


def printable(allow: str = "") -> AfterValidator:
    """Refuses control characters (except ``allow``) with a message of its own."""

    def check(value: str) -> str:
        if has_control_chars(value, allow):
            raise PydanticCustomError("control_chars", "Remove the control characters.")
        return value

    return AfterValidator(check)


def field_errors(error: ValidationError, messages: dict[str, str]) -> dict[str, str]:
    """One plain message per offending field: the rule's own (control
    characters, email) or the field's from ``messages``."""
    found: dict[str, str] = {}
    for item in error.errors(include_url=False, include_input=False):
        if not item["loc"]:
            found[""] = NOT_AN_OBJECT
            continue
        name = str(item["loc"][0])
        if item["type"] == "extra_forbidden":
            found[name] = "Unknown field."
        elif item["type"] in ("control_chars", "email"):
            found[name] = item["msg"]
        else:
            found.setdefault(name, messages.get(name, "Fix this field."))
    return found
