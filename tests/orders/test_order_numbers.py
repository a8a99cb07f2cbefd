"""An order has a number people quote and a key that opens it: the number
alone opens nothing, and the key is never logged or counted."""

from __future__ import annotations

import logging
import re

import pytest
from alembic import command
from sqlalchemy import text

from tests.cancel.test_cancel import cancel_form
from tests.conftest import VALID, hidden
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import new_api_key, place
from tests.support.migrations import alembic_config, insert_old_orders
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of
from webapp.request_log import json_lines
from webapp.shop.order_rules import ORDER_NUMBER_ALPHABET

NUMBER = re.compile(r'data-order-number="([^"]+)"')


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def placed(client) -> tuple[str, str]:
    """(private link, order number) of an order placed through the form."""
    link = order_path(submit(client, open_form(client)))
    match = NUMBER.search(client.get(link).text)
    assert match, "the confirmation page carries data-order-number"
    return link, match.group(1)


def test_the_number_is_short_and_readable_and_the_key_is_128_random_bits(placed):
    link, number = placed
    key = link.rsplit("/", 1)[1]
    assert len(number) == 10 and set(number) <= set(ORDER_NUMBER_ALPHABET)
    # 22 URL-safe characters: 132 bits, 128 random
    assert len(key) == 22 and key != number


@pytest.mark.parametrize("typed", [str, str.lower, lambda n: f"{n[:5]}-{n[5:]}"])
@pytest.mark.parametrize(
    "path, method",
    [
        ("/orders/{}", "GET"),
        ("/orders/{}/cancel", "GET"),
        ("/orders/{}/cancel", "POST"),
        ("/orders/{}/refund", "GET"),
        ("/orders/{}/refunds", "POST"),
    ],
)
def test_the_number_alone_opens_nothing_for_another_session(
    app, placed, servers, path, method, typed
):
    _, number = placed
    stranger = app.test_client()
    data = {**open_form(stranger), "amount": "1"} if method == "POST" else None
    response = stranger.open(path.format(typed(number)), method=method, data=data)
    # 400: no form token
    assert response.status_code in (400, 404), response.status_code
    page = response.text
    assert VALID["email"] not in page and "Lovelace" not in page and "London" not in page
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT status FROM orders")) == "placed"


def test_find_order_looks_an_order_up_by_the_number_a_customer_quotes(app, placed):
    link, number = placed
    runner = app.test_cli_runner()
    found = runner.invoke(args=["orders", "find", f" {number[:4].lower()}-{number[4:]} "])
    assert found.exit_code == 0, found.output
    assert number in found.output and VALID["email"] in found.output
    assert "status=placed" in found.output and "3600 EUR" in found.output
    # the key only when asked for
    assert link not in found.output
    assert link in runner.invoke(args=["orders", "find", number, "--link"]).output
    missing = runner.invoke(args=["orders", "find", "2222222222"])
    assert missing.exit_code == 1 and "No order has the number" in missing.output


def test_the_log_holds_no_order_key_after_viewing_cancelling_and_refunding(
    app, client, servers, placed, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    link, number = placed
    key = link.rsplit("/", 1)[1]
    client.get(link)
    client.get(f"{link}?already_placed=1")
    assert deliver(client, paid(reference_of(servers, link))).status_code == 200
    assert client.post(f"{link}/cancel", data=cancel_form(client, link)).status_code == 303
    html = client.get(f"{link}/refund").text
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    assert client.post(f"{link}/refunds", data={**tokens, "amount": "36"}).status_code == 303
    client.get(f"{link}/nope")
    as_json = json_lines()
    logged = "\n".join(f"{as_json.format(r)} {r.exc_text or ''}" for r in caplog.records)
    # what reached stderr, as a log pipeline reads it
    logged += capfd.readouterr().err
    assert '"route":"/orders/<public_id>/cancel"' in logged
    # support can find the requests
    assert f'"order_number":"{number}"' in logged
    assert key not in logged


def test_migration_0006_numbers_the_orders_that_were_already_there(servers, placed):
    with servers.engine.begin() as conn:
        config = alembic_config(conn)
        command.downgrade(config, "0005")
        insert_old_orders(conn, 50)
        command.upgrade(config, "head")
        numbers = conn.scalars(text("SELECT order_number FROM orders")).all()
        currencies = set(conn.scalars(text("SELECT currency FROM orders")))
    assert len(numbers) == len(set(numbers)) == 51 and currencies == {"EUR"}
    assert all(len(n) == 10 and set(n) <= set(ORDER_NUMBER_ALPHABET) for n in numbers)


def test_the_api_names_an_order_by_its_key_and_shows_its_number(client, servers):
    api_key = new_api_key(servers)
    body = place(client, api_key).get_json()
    assert len(body["id"]) == 22 and len(body["order_number"]) == 10
    assert body["currency"] == "EUR" and body["total_cents"] == 3600
    assert client.get(f"/orders/{body['order_number']}").status_code == 404
    shown = client.get(
        f"/api/orders/{body['id']}", headers={"Authorization": f"Bearer {api_key}"}
    ).get_json()
    assert shown == body
    stranger = new_api_key(servers, "another-client")
    assert (
        client.get(
            f"/api/orders/{body['id']}", headers={"Authorization": f"Bearer {stranger}"}
        ).status_code
        == 404
    )
