"""Bad input, one row a case: a clear 4xx page, never a 500, and no valid token burned.

Every row starts from a user who has the order form open (a live token), sends
one bad request, and checks the page; then the user submits their form as it
was and it still places exactly one order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from werkzeug.datastructures import MultiDict

from tests.conftest import VALID, Servers, flashed, hidden, order_count
from webapp.orders import EXPIRED, FORM

SCRIPT = '<script>alert("x")</script>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"
BAD_TOKEN = "without a valid form token"
SESSION = "Your session expired"
REPEATED = "was sent more than once"
CROSS_SITE = "We could not confirm that this form was sent from our own site"


@dataclass
class User:
    """A user with the order form open, and what a case may need around them."""

    app: Flask
    client: FlaskClient
    tokens: dict[str, str]
    servers: Servers

    def post(self, data: dict[str, object], **kwargs):
        return self.client.post("/orders", data=data, **kwargs)

    def fields(self, **changes: object) -> dict[str, object]:
        """The filled-in form with ``changes``; a change to None drops the field."""
        data = {**VALID, **self.tokens, **changes}
        return {k: v for k, v in data.items() if v is not None}

    def other_token(self, *, form: str = FORM) -> str:
        """A second live token of this session (for ``form``), not the one on the page."""
        with self.client.session_transaction() as session:
            sid = session["_submit_once_sid"]
        return self.app.extensions["submit_once"].store.create(session_id=sid, form=form)

    def key_of(self, token: str) -> str:
        with self.client.session_transaction() as session:
            sid = session["_submit_once_sid"]
        store = self.app.extensions["submit_once"].store
        return store.key(store.digest(token, session_id=sid, form=FORM))


def fields(**changes: object) -> Callable[[User], object]:
    return lambda user: user.post(user.fields(**changes))


def body(raw: bytes, content_type: str) -> Callable[[User], object]:
    return lambda user: user.post(raw, content_type=content_type)


def method(verb: str, path: str) -> Callable[[User], object]:
    return lambda user: user.client.open(path, method=verb, data=user.fields())


def page(path: str) -> Callable[[User], object]:
    return lambda user: user.client.get(path)


def token_of_another_session(user: User):
    stranger = user.app.test_client()
    html = stranger.get("/orders/new").get_data(as_text=True)
    return user.post(user.fields(form_token=hidden(html, "form_token")))


def token_for_another_form(user: User):
    return user.post(user.fields(form_token=user.other_token(form="newsletter")))


def expired_token(user: User):
    token = user.other_token()
    user.client.application.extensions["submit_once"].store.client.delete(user.key_of(token))
    return user.post(user.fields(form_token=token))


def replayed_by_another_session(user: User):
    token = user.other_token()
    assert user.post(user.fields(form_token=token)).status_code == 303
    stranger = user.app.test_client()
    html = stranger.get("/orders/new").get_data(as_text=True)
    return stranger.post(
        "/orders", data={**VALID, "form_token": token, "csrf_token": hidden(html, "csrf_token")}
    )


def csrf_of_another_session(user: User):
    html = user.app.test_client().get("/orders/new").get_data(as_text=True)
    return user.post(user.fields(csrf_token=hidden(html, "csrf_token")))


def forged(**headers: str) -> Callable[[User], object]:
    """Another site's page auto-submitting the form: no CSRF token, its own fields."""
    return lambda user: user.post(user.fields(csrf_token=None, name=SCRIPT), headers=headers)


def by_order_number(path: str) -> Callable[[User], object]:
    """Someone else's real order, asked for by the number its customer quotes."""

    def send(user: User):
        owner = user.app.test_client()
        html = owner.get("/orders/new").get_data(as_text=True)
        placed = owner.post(
            "/orders",
            data={
                **VALID,
                "email": "owner@example.com",
                "csrf_token": hidden(html, "csrf_token"),
                "form_token": hidden(html, "form_token"),
            },
        )
        number = re.search(
            r'data-order-number="([^"]+)"', owner.get(placed.headers["Location"]).text
        ).group(1)
        response = user.client.get(path.format(number))
        assert "owner@example.com" not in response.text
        return response

    return send


def inactive_product(user: User):
    with user.servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET active = false WHERE id = 2"))
    return user.post(user.fields(product="2"))


CASES = {
    # form_token
    "token-missing": (fields(form_token=None), 400, BAD_TOKEN),
    "token-empty": (fields(form_token=""), 400, BAD_TOKEN),
    "token-whitespace": (fields(form_token=" " * 43), 400, BAD_TOKEN),
    "token-overlong-10kB": (fields(form_token="a" * 10_240), 400, BAD_TOKEN),
    "token-too-short": (fields(form_token="a" * 42), 400, BAD_TOKEN),
    "token-non-ascii": (fields(form_token="é" * 43), 400, BAD_TOKEN),
    "token-with-nul": (fields(form_token="a" * 21 + "\x00" + "a" * 21), 400, BAD_TOKEN),
    "token-wrong-alphabet": (fields(form_token="+/" * 21 + "="), 400, BAD_TOKEN),
    "token-sent-twice": (
        lambda u: u.post(u.fields(form_token=[u.tokens["form_token"]] * 2)),
        400,
        BAD_TOKEN,
    ),
    "token-of-another-session": (token_of_another_session, 409, EXPIRED),
    "token-for-another-form": (token_for_another_form, 409, EXPIRED),
    "token-expired": (expired_token, 409, EXPIRED),
    "token-replayed-by-another-session": (replayed_by_another_session, 409, EXPIRED),
    # CSRF
    "csrf-missing": (fields(csrf_token=None), 400, SESSION),
    "csrf-invalid": (fields(csrf_token="not-a-csrf-token"), 400, SESSION),
    "csrf-of-another-session": (csrf_of_another_session, 400, SESSION),
    "csrf-missing-same-origin": (forged(Origin="http://localhost"), 400, SESSION),
    "csrf-missing-same-site": (forged(**{"Sec-Fetch-Site": "same-origin"}), 400, SESSION),
    "forged-cross-site": (forged(**{"Sec-Fetch-Site": "cross-site"}), 403, CROSS_SITE),
    "forged-other-origin": (forged(Origin="https://evil.example"), 403, CROSS_SITE),
    "forged-null-origin": (forged(Origin="null"), 403, CROSS_SITE),
    "forged-other-port": (forged(Origin="http://localhost:8080"), 403, CROSS_SITE),
    # fields
    "product-empty": (fields(product=""), 422, "Choose a product."),
    "product-not-a-number": (fields(product="mug"), 422, "Choose one of the products"),
    "product-unknown": (fields(product="999"), 422, "Choose one of the products on sale."),
    "product-inactive": (inactive_product, 422, "Choose one of the products on sale."),
    "product-negative": (fields(product="-1"), 422, "Choose one of the products on sale."),
    "product-huge": (fields(product="9" * 40), 422, "Choose one of the products on sale."),
    "quantity-empty": (fields(quantity=""), 422, "Enter how many you want."),
    "quantity-zero": (fields(quantity="0"), 422, "Choose a quantity from 1 to 99."),
    "quantity-negative": (fields(quantity="-3"), 422, "Choose a quantity from 1 to 99."),
    "quantity-huge": (fields(quantity="9" * 40), 422, "Choose a quantity from 1 to 99."),
    "quantity-not-a-number": (fields(quantity="two"), 422, "Enter a whole number."),
    "quantity-fraction": (fields(quantity="1.5"), 422, "Enter a whole number."),
    "name-empty": (fields(name=""), 422, "Enter your name."),
    "name-whitespace": (fields(name="   "), 422, "This field is required."),
    "name-too-long": (fields(name="n" * 101), 422, "Use at most 100 characters."),
    "name-control-chars": (fields(name="Ada\x00\x07"), 422, "Remove the control characters"),
    "email-empty": (fields(email=""), 422, "Enter your email address."),
    "email-invalid": (fields(email="ada@"), 422, "Enter an email address like"),
    "email-too-long": (
        fields(email="a" * 250 + "@example.com"),
        422,
        "Use at most 254 characters.",
    ),
    "address-empty": (fields(address=""), 422, "Enter the address we should ship to."),
    "address-too-long": (fields(address="x" * 501), 422, "Use at most 500 characters."),
    "address-control-chars": (fields(address="1 Road\x1b[2J"), 422, "Remove the control"),
    "script-in-name": (fields(name=SCRIPT, quantity="0"), 422, ESCAPED),
    "script-in-email": (fields(email=SCRIPT), 422, ESCAPED),
    "script-in-address": (fields(address=SCRIPT, quantity="0"), 422, ESCAPED),
    "quantity-sent-twice": (fields(quantity=["1", "2"]), 400, REPEATED),
    "name-sent-twice": (fields(name=["Ada", "Eve"]), 400, REPEATED),
    "field-sent-twice-without-csrf": (fields(csrf_token=None, quantity=["1", "2"]), 400, REPEATED),
    # the request itself
    "json-body": (body(b'{"product": 1}', "application/json"), 415, "not as another kind"),
    "text-body": (body(b"product=1", "text/plain"), 415, "not as another kind"),
    "oversized-body": (fields(address="x" * 70_000), 413, "That was too much data"),
    "put-orders": (method("PUT", "/orders"), 405, "That action is not allowed here"),
    "delete-order": (method("DELETE", "/orders/AAAAAAAAAAAAAAAAAAAAAA"), 405, "not allowed"),
    "post-to-the-form-page": (method("POST", "/orders/new"), 405, "not allowed"),
    "unknown-order": (page("/orders/AAAAAAAAAAAAAAAAAAAAAA"), 404, "There is no order"),
    "order-by-internal-id": (page("/orders/1"), 404, "There is no order"),
    "malformed-order-id": (page("/orders/%00%27%22%3Cx%3E"), 404, "There is no order"),
    "overlong-order-id": (page("/orders/" + "A" * 2000), 404, "There is no order"),
    "malformed-order-id-to-refund": (page("/orders/%00/refund"), 404, "There is no order"),
    "malformed-order-id-to-cancel": (page("/orders/%00/cancel"), 404, "There is no order"),
    "unknown-order-to-refund": (
        page("/orders/AAAAAAAAAAAAAAAAAAAAAA/refund"),
        404,
        "There is no order",
    ),
    "unknown-page": (page("/admin"), 404, "Page not found"),
    "order-by-its-number": (by_order_number("/orders/{}"), 404, "There is no order"),
    "cancel-by-order-number": (by_order_number("/orders/{}/cancel"), 404, "There is no order"),
    "refund-by-order-number": (by_order_number("/orders/{}/refund"), 404, "There is no order"),
}


@pytest.fixture
def user(app, client, servers) -> User:
    html = client.get("/orders/new").get_data(as_text=True)
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    return User(app, client, tokens, servers)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_gets_a_clear_4xx_page_and_burns_no_valid_token(user, servers, case):
    send, status, message = case
    response = send(user)
    html = response.get_data(as_text=True)
    assert response.status_code == status, html[:600]
    assert response.mimetype == "text/html" and message in html
    assert "Traceback" not in html and SCRIPT not in html
    placed_by_the_case = order_count(servers)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET active = true"))
    # the user's own form, as it was
    done = user.post(user.fields())
    assert done.status_code == 303, done.get_data(as_text=True)[:600]
    # a new order, not a repeat
    assert "already_placed" not in flashed(done)
    assert order_count(servers) == placed_by_the_case + 1


def test_the_table_covers_at_least_forty_cases():
    assert len(CASES) >= 40


# Field names a form body may carry, real ones and noise.
NAMES = st.sampled_from(
    ["product", "quantity", "name", "email", "address", "form_token", "csrf_token", "", "x"]
) | st.text(max_size=8)
VALUES = st.text(max_size=60) | st.sampled_from(["1", "0", "-1", "99", "100", "a" * 43, SCRIPT])


#: 15 here, as tests/app/test_fuzz.py's (which fuzzes this form too); scripts/soak: 500.
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))


@pytest.mark.soak
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pairs=st.lists(st.tuples(NAMES, VALUES), max_size=10),
    keep=st.sets(st.sampled_from(["csrf_token", "form_token", "fields"])),
    raw=st.none() | st.binary(max_size=300),
)
def test_any_form_body_is_answered_below_500_and_places_at_most_one_order_per_token(
    user, servers, pairs, keep, raw
):
    html = user.client.get("/orders/new").get_data(as_text=True)
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    data = [(k, v) for k, v in tokens.items() if k in keep]
    if "fields" in keep:
        data += list(VALID.items())
    data += pairs
    before = order_count(servers)
    if raw is not None:
        response = user.post(raw, content_type="application/x-www-form-urlencoded")
    else:
        response = user.post(MultiDict(data))
    assert response.status_code < 500, response.get_data(as_text=True)[:600]
    # one fresh token was in play, at most
    assert order_count(servers) - before <= 1
    # Once more with the same body: the token, if it was used, is spent.
    if raw is None:
        again = user.post(MultiDict(data))
        assert again.status_code < 500
        assert order_count(servers) - before <= 1
