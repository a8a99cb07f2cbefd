"""Test that your own forms take effect once: a pytest plugin.

Installed with the library (a ``pytest11`` entry point), it gives every suite the
``once_forms`` fixture, a :class:`OnceForms` over the ``client`` fixture you already have
(Flask's test client)::

    def test_a_double_click_signs_up_once(once_forms, count_signups):
        page = once_forms.open("/signup")
        answers = page.submit_twice({"email": "ada@example.com"})
        once_forms.assert_once(answers, rows=count_signups)

    def test_back_edit_resubmit_is_told_not_dropped(once_forms):
        page = once_forms.open("/signup")
        page.submit({"email": "ada@example.com"})
        # The same rendering, edited.
        again = page.submit({"email": "grace@example.com"})
        assert again.status_code == 409 and "grace@example.com" in again.text

    def test_a_double_click_sends_the_letter_once(once_forms, count_letters):
        page = once_forms.open("/refer")
        # a file: its bytes and its name, sent afresh by each submit
        letter = {"letter": (b"%PDF-1.7 ...", "letter.pdf")}
        once_forms.assert_once(page.submit_twice(letter), rows=count_letters)

Everything runs through your app, your Redis and your database: nothing is faked. The
fixture turns the per-address form limit off on the app
(``SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE = 0``): a suite opens many forms from one
address, and a bare 429 would hide what a test is about.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

__all__ = ["FormPage", "OnceForms", "landed_on", "once_forms"]

Data = Mapping[str, Any]


def landed_on(answer: TestResponse) -> str | None:
    """Where ``answer`` took the user: its ``Location`` (a redirect, or a script's 201 or
    200), its ``HX-Redirect``, or the ``Content-Location`` of a result htmx swaps in
    place; None when it did not land on a result."""
    for header in ("Location", "HX-Redirect", "Content-Location"):
        if answer.headers.get(header):
            return answer.headers[header]
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
        """What a submit of this rendering sends: its hidden fields, its token and
        ``data`` (the fields the user filled in), as :meth:`submit` posts them. A file is
        ``(content, filename)`` or ``(content, filename, content_type)``, ``content``
        bytes: each submit sends it afresh (the test client closes a file it sent)."""
        sent = {**self.hidden, **({self.forms.field: self.token} if self.token else {}), **data}
        return {
            name: (io.BytesIO(value[0]), *value[1:])
            if isinstance(value, tuple) and value and isinstance(value[0], bytes)
            else value
            for name, value in sent.items()
        }

    def submit(
        self,
        data: Data,
        *,
        client: FlaskClient | None = None,
        headers: Mapping[str, str] | None = None,
        json: bool = False,
        to: str | None = None,
    ) -> TestResponse:
        """Submit this rendering (again, if it was already): what Back + submit does.
        ``json``: as a script would, a JSON body (the CSRF token in ``X-CSRFToken``);
        ``headers``: say ``{"HX-Request": "true"}`` for htmx."""
        client = client or self.forms.client
        sent = self.fields(data)
        headers = dict(headers or {})
        if json:
            csrf = sent.pop("csrf_token", None)
            if csrf:
                headers.setdefault("X-CSRFToken", csrf)
            return client.post(to or self.url, json=sent, headers=headers)
        return client.post(to or self.url, data=sent, headers=headers)

    def submit_twice(self, data: Data, **how: Any) -> list[TestResponse]:
        """A double click: the same rendering submitted twice, one after the other
        (``how``: the keyword arguments of :meth:`submit`)."""
        return [self.submit(data, **how), self.submit(data, **how)]

    def submit_concurrently(
        self,
        versions: Iterable[Data],
        *,
        headers: Mapping[str, str] | None = None,
        json: bool = False,
        to: str | None = None,
    ) -> list[TestResponse]:
        """Each of ``versions`` submitted at once from its own connection of the same
        browser session (two tabs of one page, a storm of retries); the answers in the
        order of ``versions``."""
        versions = list(versions)
        answers: list[TestResponse | None] = [None] * len(versions)
        clients = [self.forms.clone() for _ in versions]
        start = threading.Barrier(len(versions))

        def send(number: int) -> None:
            start.wait()
            answers[number] = self.submit(
                versions[number], client=clients[number], headers=headers, json=json, to=to
            )

        threads = [threading.Thread(target=send, args=(n,)) for n in range(len(versions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [answer for answer in answers if answer is not None]


class OnceForms:
    """Open and submit once-only forms through a Flask test client.

    :param client: the app's test client (its cookie jar is the browser session).
    :param field: the token's form field (``SUBMIT_ONCE_FIELD``).
    """

    def __init__(self, client: FlaskClient, *, field: str = "form_token") -> None:
        self.client, self.field = client, field

    def open(
        self, url: str, *, form: int = 0, headers: Mapping[str, str] | None = None
    ) -> FormPage:
        """GET ``url`` and keep what its ``form``-th ``<form>`` carried (200 expected)."""
        response = self.client.get(url, headers=dict(headers or {}))
        assert response.status_code == 200, f"GET {url}: {response.status_code}"
        return self.page(url, response.text, form=form)

    def page(self, url: str, html: str, *, form: int = 0) -> FormPage:
        """The ``form``-th ``<form>`` in ``html`` (a 409 or 422 answer, say, or a result
        htmx swapped in with the next form), found at ``url``, as a page to submit."""
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
        """One row was made, and every answer lands on it (:func:`landed_on`: one
        ``Location``, ``HX-Redirect`` or, for a result htmx swaps in place,
        ``Content-Location``); returns where."""
        places = {landed_on(answer) for answer in answers}
        assert rows() == 1, f"{rows()} rows for one form"
        assert len(places) == 1 and None not in places, (
            f"answers landed on {places} ({[a.status_code for a in answers]})"
        )
        return str(places.pop())


@pytest.fixture
def once_forms(request: pytest.FixtureRequest) -> OnceForms:
    """A :class:`OnceForms` over your ``client`` fixture (Flask's test client), with the
    app's per-address form limit off."""
    client: FlaskClient = request.getfixturevalue("client")
    config = client.application.config
    config["SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"] = 0
    return OnceForms(client, field=config.get("SUBMIT_ONCE_FIELD_NAME", "form_token"))
