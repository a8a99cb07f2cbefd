"""Test that your own forms take effect once: a pytest plugin.

Installed with the library (a ``pytest11`` entry point), it gives every suite the
``once_forms`` fixture, a :class:`OnceForms` over the ``client`` fixture you already
have (Flask's test client)::

    def test_a_double_click_signs_up_once(once_forms, count_signups):
        page = once_forms.open("/signup")
        answers = page.submit_twice({"email": "ada@example.com"})
        once_forms.assert_once(answers, rows=count_signups)

    def test_back_edit_resubmit_is_told_not_dropped(once_forms):
        page = once_forms.open("/signup")
        page.submit({"email": "ada@example.com"})
        again = page.submit({"email": "grace@example.com"})  # the same rendering, edited
        assert again.status_code == 409 and "grace@example.com" in again.text

Everything runs through your app, your Redis and your database: nothing is faked.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

__all__ = ["FormPage", "OnceForms", "hidden_value", "once_forms"]

Data = Mapping[str, str | Sequence[str]]


def hidden_value(html: str, name: str) -> str | None:
    """The value of the hidden input called ``name`` in ``html``, or None."""
    for tag in re.findall(r"<input\b[^>]*>", html):
        if re.search(rf'\bname="{re.escape(name)}"', tag):
            value = re.search(r'\bvalue="([^"]*)"', tag)
            return value.group(1) if value else ""
    return None


@dataclass
class FormPage:
    """One rendering of a form: where it is sent (its ``action``), its token and the
    hidden fields it carried (a CSRF token among them), as a browser holds it."""
    forms: OnceForms
    url: str
    token: str | None
    hidden: dict[str, str]

    def fields(self, data: Data) -> dict[str, Any]:
        return {**self.hidden, **({self.forms.field: self.token} if self.token else {}),
                **data}

    def submit(self, data: Data, *, client: FlaskClient | None = None,
               headers: Mapping[str, str] | None = None, to: str | None = None) -> TestResponse:
        """Submit this rendering (again, if it was already): what Back + submit does."""
        return (client or self.forms.client).post(to or self.url, data=self.fields(data),
                                                  headers=dict(headers or {}))

    def submit_twice(self, data: Data) -> list[TestResponse]:
        """A double click: the same rendering submitted twice, one after the other."""
        return [self.submit(data), self.submit(data)]

    def submit_concurrently(self, versions: Iterable[Data], *,
                            to: str | None = None) -> list[TestResponse]:
        """Each of ``versions`` submitted at once from its own connection of the
        same browser session (two tabs of one page, a storm of retries); the answers
        in the order of ``versions``."""
        versions = list(versions)
        answers: list[TestResponse | None] = [None] * len(versions)
        clients = [self.forms.clone() for _ in versions]
        start = threading.Barrier(len(versions))

        def send(number: int) -> None:
            start.wait()
            answers[number] = self.submit(versions[number], client=clients[number], to=to)

        threads = [threading.Thread(target=send, args=(n,)) for n in range(len(versions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [answer for answer in answers if answer is not None]


class OnceForms:
    """Open and submit once-only forms through a Flask test client.

    :param client: the app's test client (its cookie jar is the browser session).
    :param field: the token's form field (``FORM_TOKENS_FIELD``).
    """

    def __init__(self, client: FlaskClient, *, field: str = "form_token") -> None:
        self.client, self.field = client, field

    def open(self, url: str, *, form: int = 0,
             headers: Mapping[str, str] | None = None) -> FormPage:
        """GET ``url`` and keep what its ``form``-th ``<form>`` carried (200 expected)."""
        response = self.client.get(url, headers=dict(headers or {}))
        assert response.status_code == 200, f"GET {url}: {response.status_code}"
        return self.page(url, response.text, form=form)

    def page(self, url: str, html: str, *, form: int = 0) -> FormPage:
        """The ``form``-th ``<form>`` in ``html`` (a 409 or 422 answer, say), found at
        ``url``, as a page to submit."""
        forms = re.findall(r"<form\b.*?</form>", html, flags=re.S) or [html]
        action = re.match(r'<form\b[^>]*\baction="([^"]*)"', forms[form])
        hidden = {}
        for tag in re.findall(r"<input\b[^>]*>", forms[form]):
            attributes = dict(re.findall(r'\b([\w-]+)="([^"]*)"', tag))
            if attributes.get("type") == "hidden" and "name" in attributes:
                hidden[attributes["name"]] = attributes.get("value", "")
        token = hidden.pop(self.field, None)
        return FormPage(self, urljoin(url, action.group(1)) if action else url, token, hidden)

    def clone(self) -> FlaskClient:
        """Another connection of the same browser session (its session cookie copied)."""
        app = self.client.application
        other = app.test_client()
        name = app.config["SESSION_COOKIE_NAME"]
        cookie = self.client.get_cookie(name)
        if cookie is not None:
            other.set_cookie(name, cookie.value, domain=cookie.domain, path=cookie.path)
        return other

    @staticmethod
    def assert_once(answers: Sequence[TestResponse], *, rows: Callable[[], int]) -> str:
        """One row was made, and every answer lands on it (one ``Location``, or one
        ``HX-Redirect``); returns where."""
        places = {answer.headers.get("Location") or answer.headers.get("HX-Redirect")
                  for answer in answers}
        assert rows() == 1, f"{rows()} rows for one form"
        assert len(places) == 1 and None not in places, \
            f"answers landed on {places} ({[a.status_code for a in answers]})"
        return str(places.pop())


@pytest.fixture
def once_forms(request: pytest.FixtureRequest) -> OnceForms:
    """A :class:`OnceForms` over your ``client`` fixture (Flask's test client)."""
    return OnceForms(request.getfixturevalue("client"))
