"""What a request says about itself: how it wants its answer, the token it carries,
the form it is for, and whether another site sent it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from flask import current_app, request

from ._errors import BadFormToken, NotUnicode
from ._signed import is_signed
from ._tokens import is_well_formed

__all__ = [
    "TOKEN_HEADER",
    "RequestKind",
    "cross_site",
    "form_name",
    "json_body",
    "request_kind",
    "submitted_token",
]

RequestKind = Literal["html", "htmx", "json"]
#: The header a script may send the token in instead of the form field.
TOKEN_HEADER = "X-Submit-Once-Token"
_CHECKED = "flask_submit_once.json_checked"


def request_kind() -> RequestKind:
    """``"htmx"`` (``HX-Request: true``), ``"json"`` (a JSON body, or an ``Accept`` that
    prefers JSON to HTML), else ``"html"``. Worked out once a request, from the raw
    headers where they are plain (browsers' own ``Accept`` always names ``text/html``)."""
    environ = request.environ
    kind: RequestKind | None = environ.get("flask_submit_once.kind")
    if kind is None:
        accept = environ.get("HTTP_ACCEPT", "")
        if environ.get("HTTP_HX_REQUEST") == "true":
            kind = "htmx"
        elif "json" in environ.get("CONTENT_TYPE", "").lower() and request.is_json:
            kind = "json"
        elif "json" not in accept:
            kind = "html"
        elif "html" not in accept:
            kind = "json"
        else:
            best = request.accept_mimetypes.best_match(["text/html", "application/json"])
            kind = "json" if best == "application/json" else "html"
        request.environ["flask_submit_once.kind"] = kind
    return kind


def json_body() -> dict[str, Any] | None:
    """The request's JSON object, or None (not JSON, not an object, or unreadable: too
    deep to parse is as unreadable as malformed, never a 500). :class:`NotUnicode` (400)
    when it carries a lone surrogate, which no database column or digest can take."""
    if not request.is_json:
        return None
    try:
        body = request.get_json(silent=True)
    except RecursionError:
        return None
    if not isinstance(body, dict):
        return None
    if not request.environ.get(_CHECKED):  # read up to three times a submit: checked once
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise NotUnicode() from None
        except (RecursionError, ValueError):
            return None
        request.environ[_CHECKED] = True
    return body


def submitted_token(field: str) -> str:
    """The token this request carries: the form field ``field``, else the
    ``X-Submit-Once-Token`` header, else that member of a JSON object body.
    :class:`BadFormToken` (400) if it is missing, repeated or malformed, before anything
    touches Redis."""
    values: list[Any] = request.form.getlist(field)
    if not values and TOKEN_HEADER in request.headers:
        values = request.headers.getlist(TOKEN_HEADER)
    if not values:
        body = json_body()
        if body is not None and field in body:
            values = [body[field]]
    if len(values) != 1 or not (is_well_formed(values[0]) or is_signed(values[0])):
        raise BadFormToken()
    return str(values[0])


#: Where a protected view keeps the name its decorator was given, if any.
NAME_ATTRIBUTE = "_submit_once_name"


def form_name(endpoint: str, values: Mapping[str, Any] | None = None) -> str:
    """What a token is bound to: the form's name (the endpoint it is sent to, unless its
    decorator named it) and the values of its URL (``cancel`` for order 17 is another
    form than for order 18)."""
    view = current_app.view_functions.get(endpoint)
    base = getattr(view, NAME_ATTRIBUTE, None) or endpoint
    if not values:
        return base
    return base + "".join(f":{name}={values[name]}" for name in sorted(values))


def cross_site() -> bool:
    """Whether the browser says another site's page sent this request:
    ``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not ours (``null`` too)."""
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/") != f"{request.scheme}://{request.host}"
