"""Every log line of the app and the refund worker: one JSON object on stderr.

    {"time": "2026-12-01T07:01:02.345Z", "level": "WARNING", "logger": "webapp.orders.views",
     "request_id": "4f0c…", "message": "order not placed: OperationalError"}

then the fields a line passes as ``extra`` (the request log's ``route``, ``status`` …;
the worker's ``message_id``, ``order_number`` …) and, for an exception, ``error``
(its type) and ``traceback``. ``request_id`` is the HTTP request's id in the app
(webapp/request_log.py), the stream message's id in the refund worker, else null.

What is logged is chosen where it is logged: never a token, a secret, a form field
or an order's private key (tests/app/test_security.py and tests/app/test_logs.py look).
gunicorn's own lines are the exception, chosen in gunicorn: :class:`NoClientDetails`
takes out what they would carry of a client.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime

from flask import Flask, g, has_request_context
from flask.logging import default_handler

__all__ = ["JsonLines", "NoClientDetails", "bind", "configure", "init_app"]

#: Fields every line of this context carries (an asyncio task's, a thread's): the
#: refund worker binds the message it handles. Replaced, never mutated.
_BOUND: ContextVar[dict[str, object]] = ContextVar("log_fields")

#: What every LogRecord carries; anything else on a record came as ``extra``.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def bind(**fields: object) -> None:
    """Add ``fields`` to every line logged from here on in this context (an asyncio
    task starts with a copy of its creator's, so a task's fields stay its own)."""
    _BOUND.set({**_BOUND.get({}), **fields})


def _request_id(bound: dict[str, object]) -> object:
    if has_request_context() and "request_id" in g:
        return g.request_id
    return bound.get("request_id")


class JsonLines(logging.Formatter):
    """A record as one compact JSON object (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        bound = _BOUND.get({})
        line: dict[str, object] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "request_id": _request_id(bound),
            "message": record.getMessage(),
            **bound,
        }
        line.update(
            (key, value)
            for key, value in vars(record).items()
            if key not in _STANDARD and not key.startswith("_")
        )
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"), ensure_ascii=False)


#: gunicorn's own words at the start of its reason for refusing a request ("Invalid HTTP
#: request line", "Request Line is too large"), up to the quote, colon or number after
#: which it repeats what the client sent.
_GUNICORN_WORDS = re.compile(r"[A-Za-z][A-Za-z ]{0,60}")


class NoClientDetails(logging.Filter):
    """gunicorn's lines about a request it could not serve, without the client's address
    and without what the client sent (webapp/gunicorn_conf.py sets it on gunicorn.error).

    ``Invalid request from ip=<address>: <reason and up to ~4 KB of the request line>``
    becomes ``invalid request refused: <gunicorn's words for the reason>``, and ``Error
    handling request <method> <path>`` (a path may hold an order's key) loses its path;
    the traceback stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Invalid request from ip="):
            reason = _GUNICORN_WORDS.match(message.partition(": ")[2])
            record.msg = "invalid request refused: %s"
            record.args = (reason.group().strip() if reason else "unreadable",)
        elif message.startswith("Error handling request"):
            record.msg, record.args = "error handling a request", ()
        return True


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (test runners swap it)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def configure(level: int = logging.INFO) -> None:
    """JSON lines on stderr from every logger, ``webapp.*`` from ``level`` up, others
    from WARNING. Idempotent: a process that already writes JSON lines (gunicorn with
    webapp.gunicorn_conf, a second app in the same process) is left as it is."""
    root = logging.getLogger()
    if not any(isinstance(handler.formatter, JsonLines) for handler in root.handlers):
        handler = _Stderr()
        handler.setFormatter(JsonLines())
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.getLogger("webapp").setLevel(level)


def init_app(app: Flask) -> None:
    configure()
    # Flask's own handler would print the app's lines a second time, as bare text.
    app.logger.removeHandler(default_handler)
