"""Input no browser sends, on the order, cancel and refund forms, the JSON API and the
webhook: a file part named like a field, a JSON value that is not text, a body nested
20,000 deep. Each is a 4xx that says what is wrong, and nothing is spent: the form the
user has open still places (cancels, refunds) exactly once afterwards."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import text

from tests.cancel.test_cancel import cancel_form
from tests.conftest import VALID, flashed, hidden, order_count
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import ORDER, new_api_key, place, problem_type
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of
from webapp.forms import NOT_TEXT

#: 20,000 nested arrays: json.loads runs out of stack (RecursionError, not ValueError),
#: which Flask's get_json(silent=True) does not catch.
DEEP = b"[" * 20_000 + b"]" * 20_000


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


def a_file(content: bytes = b"Ada Lovelace") -> tuple[io.BytesIO, str]:
    return io.BytesIO(content), "name.txt"


def post_multipart(client, path: str, data: dict[str, object]):
    return client.post(path, data=data, content_type="multipart/form-data")


def fetch(client, path: str, body: bytes, tokens: dict[str, str]):
    """A fetch() of JSON, as the library's docs show: the tokens in headers."""
    return client.post(
        path,
        data=body,
        content_type="application/json",
        headers={"X-CSRFToken": tokens["csrf_token"], "X-Submit-Once-Token": tokens["form_token"]},
    )


@pytest.fixture
def paid_order(client, servers) -> str:
    """The private link of an order placed through the form and paid (€36.00)."""
    order = order_path(submit(client, open_form(client)))
    assert deliver(client, paid(reference_of(servers, order))).status_code == 200
    return order


def open_refund_form(client, order: str) -> dict[str, str]:
    html = client.get(f"{order}/refund").get_data(as_text=True)
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def refund_requests(servers) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM refund_requests"))


def status(servers) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT status FROM orders"))


# --- a file part named like a field ------------------------------------------------------


@pytest.mark.parametrize("field", ["name", "email", "address", "quantity", "product"])
def test_a_file_sent_as_an_order_field_is_a_422_beside_it_and_the_form_still_places_once(
    client, servers, field
):
    tokens = open_form(client)
    response = post_multipart(client, "/orders", {**VALID, **tokens, field: a_file()})
    html = response.get_data(as_text=True)
    assert response.status_code == 422, html[:600]
    assert NOT_TEXT in html and hidden(html, "form_token") == tokens["form_token"]
    assert order_count(servers) == 0
    # the form as the user has it: one new order
    placed = submit(client, tokens)
    assert placed.status_code == 303 and "already_placed" not in flashed(placed)
    assert order_count(servers) == 1


def test_a_file_sent_as_the_refund_amount_is_a_422_and_the_form_still_refunds_once(
    client, servers, paid_order
):
    tokens = open_refund_form(client, paid_order)
    response = post_multipart(client, f"{paid_order}/refunds", {**tokens, "amount": a_file(b"36")})
    html = response.get_data(as_text=True)
    assert response.status_code == 422, html[:600]
    assert NOT_TEXT in html and hidden(html, "form_token") == tokens["form_token"]
    assert refund_requests(servers) == 0
    done = client.post(f"{paid_order}/refunds", data={**tokens, "amount": "12"})
    assert done.status_code == 303 and refund_requests(servers) == 1


@pytest.mark.parametrize("field", ["form_token", "csrf_token"])
def test_a_file_sent_as_a_cancel_token_is_a_400_and_the_order_is_cancelled_once_after(
    client, servers, field
):
    order = order_path(submit(client, open_form(client)))
    tokens = cancel_form(client, order)
    response = post_multipart(
        client,
        f"{order}/cancel",
        {**tokens, field: a_file(tokens[field].encode()), "name": a_file()},
    )
    assert response.status_code == 400 and "<h1" in response.text
    assert status(servers) == "placed"
    assert client.post(f"{order}/cancel", data=tokens).status_code == 303
    assert status(servers) == "cancelled"


def nameless_part(tokens: dict[str, str]) -> bytes:
    """A multipart body with the page's tokens and one part without a name, which
    werkzeug files under the key None (found by tests/app/test_fuzz.py's long form)."""
    parts = [
        f'Content-Disposition: form-data; name="{name}"\r\n\r\n{value}'
        for name, value in tokens.items()
    ] + ["Content-Disposition: form-data\r\n\r\nx"]
    return "".join(f"--b\r\n{part}\r\n" for part in parts).encode() + b"--b--\r\n"


@pytest.mark.parametrize("csrf", ["with the CSRF token", "without it"])
@pytest.mark.parametrize("form", ["order", "cancel", "refund"])
def test_a_multipart_part_without_a_name_is_a_400_and_spends_nothing(client, servers, form, csrf):
    """Without the CSRF token, Flask-WTF looked for it under every part's name and
    called None.endswith: a 500 on every form."""
    order = None if form == "order" else order_path(submit(client, open_form(client)))
    if form == "refund":
        assert deliver(client, paid(reference_of(servers, order))).status_code == 200
    page, path = {
        "order": ("/orders/new", "/orders"),
        "cancel": (f"{order}/cancel",) * 2,
        "refund": (f"{order}/refund", f"{order}/refunds"),
    }[form]
    html = client.get(page).get_data(as_text=True)
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    sent = tokens if csrf.startswith("with ") else {"form_token": tokens["form_token"]}
    response = client.post(
        path, data=nameless_part(sent), content_type="multipart/form-data; boundary=b"
    )
    assert response.status_code == 400 and "<h1" in response.text
    assert order_count(servers) == (0 if form == "order" else 1)
    assert status(servers) in (None, "placed", "paid") and refund_requests(servers) == 0
    data = {**tokens, **VALID} if form == "order" else {**tokens, "amount": "1"}
    # the form still works, once
    assert client.post(path, data=data).status_code == 303


# --- a fetch() of JSON whose values are not text -----------------------------------------


@pytest.mark.parametrize(
    "value", [True, None, {"first": "Ada"}, ["Ada", "Eve"]], ids=["true", "null", "object", "list"]
)
def test_an_order_field_sent_as_a_json_value_that_is_no_text_is_a_422(client, servers, value):
    tokens = open_form(client)
    response = fetch(client, "/orders", json.dumps({**VALID, "name": value}).encode(), tokens)
    assert response.status_code == 422, response.get_data(as_text=True)[:600]
    assert NOT_TEXT in response.get_data(as_text=True) and order_count(servers) == 0
    assert submit(client, tokens).status_code == 303 and order_count(servers) == 1


def test_a_fetch_of_json_with_numbers_still_places_the_order(client, servers):
    body = json.dumps({**VALID, "product": 1, "quantity": 2}).encode()
    assert fetch(client, "/orders", body, open_form(client)).status_code == 201
    assert order_count(servers) == 1


@pytest.mark.parametrize("body", [b"[1]", b'"Ada"', b"5"], ids=["array", "string", "number"])
def test_a_json_body_that_is_no_object_is_a_400_and_spends_nothing(client, servers, body):
    tokens = open_form(client)
    response = fetch(client, "/orders", body, tokens)
    assert response.status_code == 400, response.get_data(as_text=True)[:600]
    assert submit(client, tokens).status_code == 303 and order_count(servers) == 1


# --- a body nested 20,000 deep -----------------------------------------------------------


def test_a_deeply_nested_refund_body_is_a_400_and_the_form_still_refunds(
    client, servers, paid_order
):
    tokens = open_refund_form(client, paid_order)
    response = fetch(client, f"{paid_order}/refunds", DEEP, tokens)
    assert response.status_code == 400 and "<h1" in response.text
    assert refund_requests(servers) == 0
    done = client.post(f"{paid_order}/refunds", data={**tokens, "amount": "12"})
    assert done.status_code == 303 and refund_requests(servers) == 1


@pytest.mark.parametrize("form_token_in", ["header", "nowhere"])
def test_a_deeply_nested_order_body_is_a_400_and_spends_nothing(client, servers, form_token_in):
    """The library reads a JSON body for the token (when no field or header carries it)
    and for the fingerprint, both with get_json(silent=True): each lets the
    RecursionError through."""
    tokens = open_form(client)
    headers = {"X-CSRFToken": tokens["csrf_token"]}
    if form_token_in == "header":
        headers["X-Submit-Once-Token"] = tokens["form_token"]
    response = client.post("/orders", data=DEEP, content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert submit(client, tokens).status_code == 303 and order_count(servers) == 1


def test_a_deeply_nested_api_body_is_a_400_problem_and_uses_no_key(client, servers):
    api_key = new_api_key(servers)
    response = client.post(
        "/api/orders",
        data=DEEP,
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {api_key}",
            "Idempotency-Key": "order-1",
            "X-CSRFToken": "x",
        },
    )
    assert response.status_code == 400 and problem_type(response) == "malformed-json"
    assert place(client, api_key, ORDER, key="order-1").status_code == 201


def test_a_deeply_nested_signed_webhook_is_a_400_problem_and_records_nothing(client, servers):
    order = order_path(submit(client, open_form(client)))
    # signed: it gets as far as the parser
    response = deliver(client, {}, body=DEEP)
    assert response.status_code == 400 and problem_type(response) == "malformed-json"
    assert status(servers) == "placed"
    assert deliver(client, paid(reference_of(servers, order))).get_json()["result"] == "applied"
