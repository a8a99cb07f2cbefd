"""``submit_once`` in templates: the hidden input of a form, and what the user is told.

::

    <form method="post" action="{{ url_for('sign_up') }}">
      {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
      {{ form.csrf_token }} {{ submit_once.input("sign_up") }}

``input`` names the form the way ``url_for`` names its endpoint (the endpoint the form is
sent to, and the values of its URL), so every form of a page finds its own token.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import request
from markupsafe import Markup

from ._errors import Unavailable
from ._issuing import issue, issued
from ._requests import form_name
from ._state import state

__all__ = ["Answering", "TemplateHelper", "answering"]

_ANSWERING = "flask_submit_once.answering"


@dataclass(frozen=True)
class Answering:
    """The submit a page answers: which form, and what its user is told."""

    form: str
    status: int
    reason: str
    message: str | None
    existing_url: str | None = None


def answering() -> Answering | None:
    """The submit this request's page answers, if it answers one."""
    found: Answering | None = request.environ.get(_ANSWERING)
    return found


def answer_with(answer: Answering) -> None:
    request.environ[_ANSWERING] = answer


class TemplateHelper:
    """The ``submit_once`` object of every template."""

    def token(self, endpoint: str, **values: object) -> str | None:
        """The token of one rendering of the form sent to ``endpoint`` (issued at the
        first call of the request, the same after). On a page that answers a submit, a
        form whose token Redis cannot give is drawn without one (None) rather than
        losing the answered form's input."""
        name = form_name(endpoint, values)
        token = issued(name)
        if token is None:
            try:
                token = issue(state(), [name])[name]
            except Unavailable:
                if answering() is None:
                    raise  # a page of forms with no token to give: the app's 503
                return None
        return token

    def input(self, endpoint: str, **values: object) -> Markup:
        """The hidden input carrying :meth:`token` (nothing when there is none)."""
        token = self.token(endpoint, **values)
        if not token:
            return Markup("")
        field = state().field
        return Markup('<input type="hidden" name="%s" value="%s">') % (field, token)

    @property
    def message(self) -> str | None:
        """What the user is told about the submit this page answers (None on a GET)."""
        found = answering()
        return found.message if found else None

    @property
    def reason(self) -> str | None:
        """Why the form is shown again: ``"invalid"``, ``"changed"``, ``"expired"``,
        ``"refused"``, ``"failed"``, ``"unconfirmed"``, ``"still_running"``,
        ``"unavailable"`` or ``"session_lost"``; None on a GET."""
        found = answering()
        return found.reason if found else None

    @property
    def existing_url(self) -> str | None:
        """Where the result lives that a changed resubmit collided with."""
        found = answering()
        return found.existing_url if found else None

    @property
    def form(self) -> str | None:
        """The name of the form whose submit this page answers."""
        found = answering()
        return found.form if found else None

    def answered(self, endpoint: str, **values: object) -> Answering | None:
        """What this page tells about the submit of the form sent to ``endpoint`` (with
        ``message``, ``reason``, ``existing_url``), or None when the page answers another
        form's submit, or none: for a page with several forms, each asking of its own."""
        found = answering()
        return found if found and found.form == form_name(endpoint, values) else None
