"""Error pages: a clear page for every client error, a 503 when Redis or PostgreSQL
is away, and never a stack trace. The app's defaults: a blueprint whose form can do
better (keep the user's input) registers its own handlers and falls back on these
(:func:`csrf_error`, :func:`unavailable`)."""

from __future__ import annotations

import logging

from flask import Flask, request
from flask_wtf.csrf import CSRFError
from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import (
    HTTPException,
    InternalServerError,
    SecurityError,
)

from flask_submit_once import UnavailableError

from .api import wants_problem
from .error_pages import render_error
from .extensions import submit_once
from .metrics import count_session_mismatch
from .problems import problem, problem_for_http_error

log = logging.getLogger(__name__)

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

#: What a dependency that did not answer raises: UnavailableError before the token was spent
#: (issuing a token, or a submit: the token is still good), Redis, PostgreSQL, and
#: every pooled connection busy for pool_timeout (a slow database, not a bug).
DEPENDENCY_ERRORS = (UnavailableError, RedisError, OperationalError, PoolTimeout)


def init_app(app: Flask) -> None:
    app.register_error_handler(CSRFError, csrf_error)
    app.register_error_handler(SecurityError, _untrusted_host)
    app.register_error_handler(HTTPException, _http_error)
    for error in DEPENDENCY_ERRORS:
        app.register_error_handler(error, unavailable)
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
    return (
        "This server does not answer for that host name.\n",
        400,
        {"Content-Type": "text/plain; charset=utf-8"},
    )


#: What the CSRF check's refusal of a form from another origin says. Not "another site sent
#: this": a proxy that drops the port from Host makes our own form look foreign, and its
#: shopper, on our order form, must not be told to go to it.
CROSS_SITE = (
    "We could not confirm that this form was sent from our own site, so we did not "
    "accept it and kept nothing of what it sent. If you filled it in on our order "
    "form, please write to orders@fernleaf.example and tell us."
)


def csrf_error(error: CSRFError):
    """The CSRF check failed. Another site's page posted here (a forged auto-submit):
    answered without a word of what it sent, without new tokens, and without touching
    the victim's session, whose open forms must keep working. A body that is not a form
    is told so; otherwise the session cookie was lost or is too old, and a protected
    form is drawn again with what was typed and fresh tokens (Flask-Submit-Once)."""
    reason = count_session_mismatch(
        request.endpoint or "", "cross_site" if sent_from_another_site() else None
    )
    if reason == "cross_site":
        return render_error(403, CROSS_SITE)
    if request.mimetype not in FORM_TYPES:
        return render_error(
            415,
            "Send this form from our order page (as an HTML form), not as another kind of data.",
        )
    drawn_again = submit_once.session_lost(error)
    if drawn_again is not None:
        return drawn_again
    return render_error(
        400,
        "Your session expired or this form was not sent from our site. "
        "Go back, reload the page and try again.",
    )


def sent_from_another_site() -> bool:
    """Whether the browser says this request came from a page of another site:
    ``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not ours (``null``
    included). Same-site requests (a lost session cookie) keep their input."""
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/") != f"{request.scheme}://{request.host}"


def unavailable_cause(error: Exception) -> Exception:
    """What did not answer (the cause an :class:`~flask_submit_once.UnavailableError` chains),
    logged by its driver's first line only: SQLAlchemy's message would add the
    statement, and the customer's details are no business of the log."""
    if isinstance(error, UnavailableError) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    cause = getattr(error, "orig", None) or error
    log.error(
        "dependency unavailable: %s: %s", type(cause).__name__, str(cause).strip().split("\n", 1)[0]
    )
    return error


#: An API client told that a dependency was away before anything was claimed (UnavailableError).
NOTHING_DONE = (
    "Nothing was placed or changed: a server this request needs (Redis or "
    "PostgreSQL) did not answer. Send the same request again after Retry-After "
    "(the same Idempotency-Key, the same event): it takes effect once."
)


def unavailable(error: Exception):
    unavailable_cause(error)
    if wants_problem():
        return problem(
            "unavailable",
            NOTHING_DONE
            if isinstance(error, UnavailableError)
            else "Please retry in a few moments.",
            headers={"Retry-After": "5"},
        )
    return try_again()


def try_again():
    return render_error(503, "Please try again in a few moments.", headers={"Retry-After": "5"})


def _server_error(error: Exception):
    log.exception("unhandled error", exc_info=error)
    if wants_problem():
        return problem("server-error", InternalServerError.description)
    return render_error(500, InternalServerError.description)
