"""One JSON line per request, for log pipelines (webapp/logs.py formats it):

    {"time": "2026-11-30T07:01:02.345Z", "level": "INFO", "logger": "webapp.requests",
     "request_id": "4f0c…", "message": "request", "method": "POST", "route": "/orders",
     "status": 303, "ms": 12.4, "token": "q3Zx1fQe0b2A", "outcome": "Created"}

``token`` is the first 12 characters of the token's digest (the Redis key and the
order's UNIQUE column), never the token. A request on an order's page carries
``order_number`` (what support is quoted), never the order's key: ``route`` is
the rule (``/orders/<public_id>``), not the path. No form fields, no addresses,
no client IPs. ``request_id`` is the caller's
``X-Request-ID`` when it looks like one (so a load balancer's id carries through),
else a new one; it is sent back in the ``X-Request-ID`` response header, and every
other line logged while the request runs carries it too.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from flask import Flask, Response, g, request, request_started

from flask_submit_once import Outcome, signals

from . import logs
from .logs import JsonLines

__all__ = ["DIGEST_PREFIX", "LOGGER", "init_app", "json_lines"]

LOGGER = "webapp.requests"
DIGEST_PREFIX = 12
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{8,64}")


def json_lines() -> JsonLines:
    """The formatter every line goes through (for tests that format records)."""
    return JsonLines()


def init_app(app: Flask) -> None:
    logs.init_app(app)
    request_started.connect(_begin, app)
    signals.submit_decided.connect(_note_submit, app)
    app.after_request(_log)


def _begin(app: Flask, **_: object) -> None:
    given = request.headers.get("X-Request-ID", "")
    g.request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    g.log_started = time.perf_counter()


def _note_submit(app: Flask, *, outcome: Outcome, digest: str, **_: object) -> None:
    # Not the outcome's result: for a form it is the order's key.
    g.log_fields = {"token": digest[:DIGEST_PREFIX], "outcome": outcome.kind}


def _log(response: Response) -> Response:
    if "log_started" not in g:
        return response
    fields: dict[str, object] = {
        "request_id": g.request_id,
        "method": request.method,
        "route": request.url_rule.rule if request.url_rule else None,
        "status": response.status_code,
        "ms": round((time.perf_counter() - g.log_started) * 1000, 1),
        **g.get("log_fields", {}),
    }
    if "order_number" in g:
        fields["order_number"] = g.order_number
    response.headers["X-Request-ID"] = g.request_id
    logging.getLogger(LOGGER).info("request", extra=fields)
    return response
