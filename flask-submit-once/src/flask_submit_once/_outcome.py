"""What happened to a submit: one :class:`Outcome`, whose ``kind`` says what the user
is shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = ["Kind", "Outcome"]

Kind: TypeAlias = Literal[
    "created",
    "duplicate",
    "changed",
    "invalid",
    "expired",
    "refused",
    "failed",
    "unconfirmed",
    "still_running",
]


@dataclass(frozen=True)
class Outcome:
    """What happened to one submit; a protected view's ``answer`` hook gets it::

        def answer(outcome):
            match outcome:
                case Outcome(kind="created", result=signup):
                    flash(f"Welcome, {signup.email}")
            return None          # the default answer for everything else

    ``kind`` is one of:

    ``"created"``
        this request spent the token and committed ``result`` (what the view returned).
    ``"duplicate"``
        an earlier request with this token committed ``result`` (a double click, a
        reload, Back + submit, a retry); ``waited`` when it was still running.
    ``"changed"``
        an earlier request with this token committed ``result`` from *other* input
        (Back, edit, submit; a duplicated tab): nothing new was done, and what this
        request sent is not in ``result``.
    ``"invalid"``
        the form's fields did not validate; nothing was spent (the form is shown again
        with the input and the same token, 422).
    ``"expired"``
        nothing exists for this token: it expired, was never issued here, or the request
        that spent it failed (``waited`` is then usually true).
    ``"refused"``
        the view raised :class:`~flask_submit_once.Refused` (``error``); nothing committed.
    ``"failed"``
        the transaction failed after the token was spent (``error``); nothing committed.
    ``"unconfirmed"``
        the database connection died mid-transaction, perhaps during the COMMIT: nobody
        knows whether ``result`` was committed. The token was put back, so resubmitting
        *the same* token settles it (it lands on the row, or makes it once).
    ``"still_running"``
        the request holding the token ran past the wait bound; resubmitting later is safe.

    ``url`` is where the result is shown, when the form names one (``done``).
    """

    kind: Kind
    result: Any = None
    waited: bool = False
    error: Exception | None = None
    url: str | None = None
    #: What the answer shows, made in the transaction (an idempotent view's response).
    shown: Any = field(default=None, repr=False, compare=False)

    @property
    def landed(self) -> bool:
        """Whether the user is taken to the result: created, or a repeat of it."""
        return self.kind in ("created", "duplicate")
