"""One JSON line per request on stderr, for log pipelines (python-json-logger
formats it):

    {"event": "request", "request_id": "4f0c…", "method": "POST", "route": "/orders",
     "status": 303, "ms": 12.4, "token": "q3Zx1fQe0b2A", "outcome": "Created",
     "ts": "2026-11-30T07:01:02.345Z"}

``token`` is the first 12 characters of the token's digest (the Redis key and the
order's UNIQUE column), never the token. A request on an order's page carries
``order_number`` (what support is quoted), never the order's key: ``route`` is
the rule (``/orders/<public_id>``), not the path. No form fields, no addresses,
no client IPs. ``request_id`` is the caller's
``X-Request-ID`` when it looks like one (so a load balancer's id carries through),
else a new one; it is sent back in the ``X-Request-ID`` response header.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
import uuid
from datetime import datetime

from flask import Flask, Response, g, request, request_started
from pythonjsonlogger.json import JsonFormatter

from submit_once import submit_decided

__all__ = ["DIGEST_PREFIX", "LOGGER", "init_app"]

LOGGER = "webapp.requests"
DIGEST_PREFIX = 12
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{8,64}")


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def _timestamp(value: object) -> object:
    """``ts`` as in "2026-11-30T07:01:02.345Z" (UTC, milliseconds)."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value)  # anything else a field may carry, readable rather than an error


def json_lines() -> JsonFormatter:
    """A record as one compact JSON object: ``ts``, ``event`` (the message),
    then the fields passed as ``extra``."""
    return JsonFormatter("{message}", style="{", rename_fields={"message": "event"},
                         timestamp="ts", json_default=_timestamp,
                         json_serializer=functools.partial(json.dumps, separators=(",", ":")))


def init_app(app: Flask) -> None:
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = _Stderr()
        handler.setFormatter(json_lines())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    request_started.connect(_begin, app)
    submit_decided.connect(_note_submit, app)
    app.after_request(_log)


def _begin(app: Flask, **_: object) -> None:
    given = request.headers.get("X-Request-ID", "")
    g.request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    g.log_started = time.perf_counter()


def _note_submit(app: Flask, *, outcome: object, digest: str, **_: object) -> None:
    # Not the outcome's result: for a form it is the order's key.
    g.log_fields = {"token": digest[:DIGEST_PREFIX], "outcome": type(outcome).__name__}


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
