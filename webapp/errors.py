"""Error pages: a clear page for every client error, a 503 that keeps the
user's input when Redis or PostgreSQL is away, and never a stack trace."""

from __future__ import annotations

import logging

from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError
from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from werkzeug.exceptions import HTTPException, InternalServerError

from .api import wants_problem
from .api.problems import problem, problem_for_http_error

log = logging.getLogger(__name__)

TITLES = {
    400: "This request could not be processed",
    404: "Page not found",
    405: "That action is not allowed here",
    413: "That was too much data",
    503: "We are briefly unavailable",
}


def init_app(app: Flask) -> None:
    app.register_error_handler(CSRFError, _csrf_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(RedisError, _unavailable)
    app.register_error_handler(OperationalError, _unavailable)
    app.register_error_handler(SQLAlchemyError, _server_error)
    app.register_error_handler(Exception, _server_error)


def _http_error(error: HTTPException):
    if wants_problem() and not (error.code and error.code >= 500):
        return problem_for_http_error(error)
    if error.code and error.code >= 500:
        return _server_error(error)
    return render_error(error.code or 400, error.description)


def _csrf_error(error: CSRFError):
    # The session cookie was lost or is too old. On the order form, give the
    # form back with what was typed instead of a dead end; the old token is
    # bound to the old session, so the form gets a fresh one.
    if request.endpoint == "orders.create":
        from .metrics import count_session_mismatch
        from .orders import FORM, resubmit_after_session_loss
        count_session_mismatch(FORM)
        return resubmit_after_session_loss()
    return render_error(400, "Your session expired or this form was not sent from our site. "
                             "Go back, reload the page and try again.")


def _unavailable(error: Exception):
    log.error("dependency unavailable: %s: %s", type(error).__name__, error)
    if wants_problem():
        return problem("unavailable", "Please retry in a few moments.",
                       headers={"Retry-After": "5"})
    if request.endpoint == "orders.create":
        from .orders import resubmit_when_unavailable
        return resubmit_when_unavailable()
    return render_error(503, "Please try again in a few moments.", headers={"Retry-After": "5"})


def _server_error(error: Exception):
    log.exception("unhandled error", exc_info=error)
    if wants_problem():
        return problem("server-error", InternalServerError.description)
    return render_error(500, InternalServerError.description)


def render_error(code: int, description: str | None, headers: dict[str, str] | None = None):
    title = TITLES.get(code, "Something went wrong")
    return render_template("errors/error.html", code=code, title=title,
                           description=description), code, headers or {}
