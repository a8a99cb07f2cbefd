"""Every exception the library raises, under one base, :class:`SubmitOnceError`.

Those a user can cause are Werkzeug HTTP errors as well, with a ``description`` in plain
words: left unhandled they are a clear 4xx or 503 page, never a 500.
"""

from __future__ import annotations

from werkzeug.exceptions import BadRequest, Forbidden, ServiceUnavailable, TooManyRequests

__all__ = [
    "FormTokenError",
    "CrossSiteError",
    "Refused",
    "SubmitOnceError",
    "TooManyFormsError",
    "UnavailableError",
    "UnsupportedDatabaseError",
    "cause_of",
]


class SubmitOnceError(Exception):
    """The base of every exception Flask-Submit-Once raises."""


class Refused(SubmitOnceError):
    """Raise from a protected view when the submission cannot be accepted as it is (the
    product went off sale since the form was checked, say). Nothing is committed; the
    user gets the form again with their input, a fresh token and ``str(refused)`` as
    the message (or the form's ``"refused"`` message when it is empty)."""


class UnavailableError(SubmitOnceError, ServiceUnavailable):
    """Redis or the database did not answer before the token was consumed: nothing was
    consumed or written, so the token is still good (503). The cause is ``__cause__``."""

    description = (
        "We could not reach our systems just now, so nothing was saved. "
        "Please try again in a moment."
    )

    def __init__(self, description: str | None = None) -> None:
        super().__init__(description, retry_after=5)

    @property
    def cause(self) -> Exception:
        """What did not answer (``__cause__``), or this error when nothing is chained."""
        return self.__cause__ if isinstance(self.__cause__, Exception) else self


class UnsupportedDatabaseError(SubmitOnceError, RuntimeError):
    """The sessions' database is one the library cannot keep its promises on: raised by
    ``init_app`` when the engine is known then, else by the first submit. Its message
    names the supported databases."""


class FormTokenError(SubmitOnceError, BadRequest):
    """The submitted form token is missing, repeated, or not a shape we issue (400)."""

    description = (
        "This form was sent without a valid form token, so it could not be "
        "processed. Open the form again and submit it from there."
    )


class NotUnicodeError(SubmitOnceError, BadRequest):
    """A JSON body carries a string no UTF-8 can hold (a lone surrogate, ``"\\ud800"``):
    nothing is read from it (400)."""

    description = (
        "The request's JSON carries text that is not valid Unicode, so it could "
        "not be processed. Send it as UTF-8 text."
    )


class TooManyFormsError(SubmitOnceError, TooManyRequests):
    """A session or a client address opened more forms than its limit allows (429, with
    ``Retry-After``). ``per`` is ``"session"`` or ``"client"``; no token was left."""

    def __init__(self, per: str, retry_after: int) -> None:
        super().__init__(_TOO_MANY[per], retry_after=retry_after)
        self.per = per


_TOO_MANY = {
    "session": "You have opened this form very many times in a short while, so we are not "
    "opening another one for now. Use a form you already have open.",
    "client": "Very many forms were opened from your network just now, so we are not "
    "opening another one yet.",
}


class CrossSiteError(SubmitOnceError, Forbidden):
    """Another site's page asked for a form without navigating to it (an iframe, an
    image, a script, a prefetch), or posted one whose session check failed (403). No
    token is issued or consumed, nothing sent is shown back, no cookie is set."""

    description = (
        "This form works only from our own pages, so nothing was done. Open it from our site."
    )


def cause_of(error: BaseException) -> str:
    """What ``error`` was, for a log line: its class and the first line of its message. A
    database error says its driver's message alone: never the statement's parameters (a
    form's input, a card's token) nor its DETAIL (a row's values)."""
    shown = getattr(error, "orig", None)
    if not isinstance(shown, BaseException):
        shown = error
    lines = str(shown).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
