"""Error pages: a clear page for every client error, a 503 that keeps the
user's input when Redis or PostgreSQL is away, and never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError
from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException, InternalServerError, SecurityError

from submit_once import Unavailable

from .api import wants_problem
from .api.problems import problem, problem_for_http_error

log = logging.getLogger(__name__)

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

TITLES = {
    400: "This request could not be processed",
    403: "This form was sent from another site",
    404: "Page not found",
    405: "That action is not allowed here",
    413: "That was too much data",
    415: "This form was sent in a format we do not accept",
    429: "Too many forms opened",
    503: "We are briefly unavailable",
}


def init_app(app: Flask) -> None:
    app.register_error_handler(CSRFError, _csrf_error)
    app.register_error_handler(SecurityError, _untrusted_host)
    app.register_error_handler(HTTPException, _http_error)
    # Before the token was spent (FormTokens.issue, submit_once): the token is still good.
    app.register_error_handler(Unavailable, _unavailable)
    app.register_error_handler(RedisError, _unavailable)
    app.register_error_handler(OperationalError, _unavailable)
    # Every pooled connection busy for pool_timeout: a slow database, not a bug.
    app.register_error_handler(PoolTimeout, _unavailable)
    app.register_error_handler(SQLAlchemyError, _server_error)
    app.register_error_handler(Exception, _server_error)


def _http_error(error: HTTPException):
    if error.code == 503 and not wants_problem():
        # A view that knows why it cannot go on (abort(503, why)): say so, and when
        # to come back; the 500 page would hide what the customer should do.
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        return render_error(503, error.description, headers={"Retry-After": "5", **headers})
    if wants_problem() and not (error.code and error.code >= 500):
        return problem_for_http_error(error)
    if error.code and error.code >= 500:
        return _server_error(error)
    # Keep what the exception says about retrying (Retry-After on 429 and 503).
    headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
    return render_error(error.code or 400, error.description, headers=headers)


def _untrusted_host(error: SecurityError):
    """A Host that TRUSTED_HOSTS does not name: plain text, no page of ours (its links
    could not be built for that host anyway), nothing of the request."""
    return ("This server does not answer for that host name.\n", 400,
            {"Content-Type": "text/plain; charset=utf-8"})


CROSS_SITE = ("Another site sent this form in your name, so we did not accept it and kept "
              "nothing of what it sent. If you meant to order, open our order form and fill "
              "it in there.")


def _csrf_error(error: CSRFError):
    # Another site's page posted here (a forged auto-submit): answer without a
    # word of what it sent, without new tokens, and without touching the
    # victim's session, whose open forms must keep working.
    if sent_from_another_site():
        if request.endpoint == "orders.create":
            from .metrics import count_session_mismatch
            count_session_mismatch("order", "cross_site")
        return render_error(403, CROSS_SITE)
    # A body that is not a form has no CSRF field either: say what is wrong.
    if request.mimetype not in FORM_TYPES:
        return render_error(415, "Send this form from our order page (as an HTML form), "
                                 "not as another kind of data.")
    # The session cookie was lost or is too old. On the order form, give the
    # form back with what was typed instead of a dead end; the old token is
    # bound to the old session, so the form gets a fresh one.
    if request.endpoint == "orders.create":
        from .metrics import count_session_mismatch
        from .orders import FORM, resubmit_after_session_loss
        count_session_mismatch(FORM)
        return _form_again(resubmit_after_session_loss)
    return render_error(400, "Your session expired or this form was not sent from our site. "
                             "Go back, reload the page and try again.")


def sent_from_another_site() -> bool:
    """Whether the browser says this request came from a page of another site:
    ``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not ours (``null``
    included). Same-site requests (a lost session cookie) keep their input."""
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/") != f"{request.scheme}://{request.host}"


def _unavailable(error: Exception):
    if isinstance(error, Unavailable) and isinstance(error.__cause__, Exception):
        error = error.__cause__  # what was unreachable, for the log and the page
    # Only the driver's first line: SQLAlchemy's message would add the statement,
    # and the customer's details are no business of the log.
    cause = getattr(error, "orig", None) or error
    log.error("dependency unavailable: %s: %s", type(cause).__name__,
              str(cause).strip().split("\n", 1)[0])
    if wants_problem():
        return problem("unavailable", "Please retry in a few moments.",
                       headers={"Retry-After": "5"})
    if request.endpoint == "orders.create":
        from .orders import resubmit_when_unavailable
        return _form_again(lambda: resubmit_when_unavailable(
            database_ok=isinstance(error, RedisError)))
    return _try_again()


def _form_again(draw: Callable[[], object]):
    # Drawing the form again may need what just failed (a fresh token from a
    # Redis that is away) or run into the session's cap: an exception raised in
    # an error handler is a 500, so fall back to the plain page.
    try:
        return draw()
    except HTTPException as error:
        return _http_error(error)
    except (Unavailable, RedisError, SQLAlchemyError) as error:
        log.error("dependency unavailable: %s", type(error).__name__)
        return _try_again()


def _try_again():
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
