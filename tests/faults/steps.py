"""What a user does and sees in the fault scenarios, as small steps."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text

from tests.conftest import VALID, Servers, hidden


def open_form(client: FlaskClient) -> dict[str, str]:
    """GET the order form; the CSRF and form tokens it carries."""
    page = client.get("/orders/new")
    assert page.status_code == 200, page.get_data(as_text=True)[:300]
    html = page.get_data(as_text=True)
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def submit(client: FlaskClient, tokens: dict[str, str], **fields: str):
    return client.post("/orders", data={**VALID, **tokens, **fields})


def same_browser(app: Flask, client: FlaskClient) -> FlaskClient:
    """Another client with the same session cookie: a second tab, a retry, a double click."""
    other = app.test_client()
    other.set_cookie("session", client.get_cookie("session").value)
    return other


def order_path(response) -> str:
    """The confirmation page a 303 leads to."""
    assert response.status_code == 303, (
        response.status_code,
        response.get_data(as_text=True)[:500],
    )
    return response.headers["Location"]


def form_kept(response, status: int, message: str) -> str:
    """Assert the failed submit shows the form again with the user's input and
    ``message``; returns the form token the page offers for the retry."""
    html = response.get_data(as_text=True)
    assert response.status_code == status, (response.status_code, html[:500])
    assert message in html
    assert 'value="Ada Lovelace"' in html and 'value="ada@example.com"' in html
    assert "12 St James&#39;s Square" in html
    assert "Traceback" not in html
    return hidden(html, "form_token")


def placed(servers: Servers) -> list[str]:
    """Public ids of every order in the database."""
    with servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT public_id FROM orders ORDER BY id")))


def assert_told_orders_exist(client: FlaskClient, *responses) -> None:
    """Every confirmation a user was sent to is a real order."""
    for response in responses:
        if response.status_code == 303:
            assert client.get(order_path(response)).status_code == 200
