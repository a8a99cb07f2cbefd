"""The payment provider is given a payment reference, and its events name the order by
it: provider-side data (its staff, its dashboard, delivery logs) holds that reference,
which opens nothing, and never the order's key, which opens everything."""

from __future__ import annotations

import logging
import re

import pytest
from alembic import command
from sqlalchemy import text

from tests.cancel.test_cancel import cancel_form
from tests.conftest import hidden
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import new_api_key, place, problem_type
from tests.support.migrations import alembic_config, insert_old_orders
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of, refunded

REFERENCE = re.compile(r"pay_[0-9a-f]{32}")


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def link(client) -> str:
    """The private link of an order placed through the form (€36.00)."""
    return order_path(submit(client, open_form(client)))


def order_row(servers) -> tuple:
    with servers.engine.connect() as conn:
        return tuple(
            conn.execute(
                text("SELECT status, paid_cents, refunded_cents, reserved_cents FROM orders")
            ).one()
        )


def counts(servers) -> tuple[int, int]:
    """(payment events recorded, refund requests made)."""
    with servers.engine.connect() as conn:
        return (
            conn.scalar(text("SELECT count(*) FROM payment_events")),
            conn.scalar(text("SELECT count(*) FROM refund_requests")),
        )


def test_an_event_naming_the_order_by_its_key_names_no_order_and_pays_nothing(
    client, servers, link, caplog
):
    """Before: the key was what events named, so this paid the order (200 applied)."""
    caplog.set_level(logging.INFO)
    key = link.rsplit("/", 1)[1]
    response = deliver(client, paid(key))
    assert response.status_code == 422 and problem_type(response) == "validation-error"
    assert response.get_json()["errors"] == {"order_id": "unknown order"}
    assert deliver(client, refunded(key)).status_code == 422
    assert order_row(servers) == ("placed", 0, 0, 0) and counts(servers) == (0, 0)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "refused, no order has this payment reference" in logged
    # what a misconfigured provider sends is not logged
    assert key not in logged
    # The same event with the reference pays it.
    assert deliver(client, paid(reference_of(servers, link), "evt_2")).status_code == 200
    assert order_row(servers)[0] == "paid"


def test_the_payment_reference_opens_nothing(client, servers, link):
    """Its page, cancel and refund are 404 and change nothing, even with the tokens
    of the real forms; the key still opens them."""
    reference = reference_of(servers, link)
    assert REFERENCE.fullmatch(reference)
    cancel_tokens = cancel_form(client, link)
    assert client.get(f"/orders/{reference}").status_code == 404
    assert client.get(f"/orders/{reference}/cancel").status_code == 404
    assert client.post(f"/orders/{reference}/cancel", data=cancel_tokens).status_code == 404
    assert order_row(servers) == ("placed", 0, 0, 0)
    assert deliver(client, paid(reference)).get_json()["result"] == "applied"
    page = client.get(f"{link}/refund").text
    refund_tokens = {
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }
    assert client.get(f"/orders/{reference}/refund").status_code == 404
    assert (
        client.post(
            f"/orders/{reference}/refunds", data={**refund_tokens, "amount": "36"}
        ).status_code
        == 404
    )
    assert order_row(servers) == ("paid", 3600, 0, 0) and counts(servers) == (1, 0)
    assert (
        client.post(f"{link}/refunds", data={**refund_tokens, "amount": "36"}).status_code == 303
        # the key opens it: the tokens were good
    )
    assert counts(servers) == (1, 1)


def test_the_api_shows_the_reference_and_it_opens_nothing_there_either(client, servers):
    api_key = new_api_key(servers)
    auth = {"Authorization": f"Bearer {api_key}"}
    body = place(client, api_key).get_json()
    reference = body["payment_reference"]
    assert REFERENCE.fullmatch(reference) and reference_of(servers, body["id"]) == reference
    assert client.get(f"/api/orders/{body['id']}", headers=auth).get_json() == body
    # the retry's replay says the same
    assert place(client, api_key).get_json() == body
    assert client.get(f"/api/orders/{reference}", headers=auth).status_code == 404
    assert client.post(f"/api/orders/{reference}/cancel", headers=auth).status_code == 404
    assert client.get(f"/orders/{reference}").status_code == 404
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT status FROM orders")) == "placed"


def test_references_are_random_and_lead_to_neither_key_nor_number(client, servers):
    api_key = new_api_key(servers)
    bodies = [place(client, api_key, key=f"order-{n}").get_json() for n in range(20)]
    references = [body["payment_reference"] for body in bodies]
    assert len(set(references)) == 20 and all(REFERENCE.fullmatch(r) for r in references)
    for body in bodies:
        secret = body["payment_reference"].removeprefix("pay_")
        assert body["id"] not in secret and body["order_number"].lower() not in secret
        assert secret not in body["id"].lower()


def test_migration_0011_gives_every_existing_order_its_own_reference(client, servers):
    """Orders placed before it (in SQL, as the release before it would) get one each,
    and a stored API response (replayed to a retry) gets the same one."""
    api_key = new_api_key(servers)
    body = place(client, api_key).get_json()
    with servers.engine.begin() as conn:
        config = alembic_config(conn)
        command.downgrade(config, "0010")
        assert "payment_reference" not in conn.scalar(text("SELECT api_response FROM orders"))
        insert_old_orders(conn, 50)
        command.upgrade(config, "head")
        references = conn.scalars(text("SELECT payment_reference FROM orders")).all()
        stored = conn.execute(
            text(
                "SELECT payment_reference, api_response FROM orders WHERE api_response IS NOT NULL"
            )
        ).one()
    assert len(references) == len(set(references)) == 51
    assert all(REFERENCE.fullmatch(r) for r in references)
    assert stored.api_response["payment_reference"] == stored.payment_reference
    assert place(client, api_key).get_json() == {
        **body,
        "payment_reference": stored.payment_reference,
    }
    assert deliver(client, paid(stored.payment_reference)).get_json()["result"] == "applied"


def number_of(servers) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT order_number FROM orders"))


@pytest.mark.parametrize(
    "events, said",
    [
        ([paid], "payment.succeeded: paid order {number}, now paid"),
        (
            [lambda r: paid(r, amount=1)],
            "payment.succeeded: recorded as an amount mismatch,"
            " not paid on order {number} (placed)",
        ),
        ([lambda r: paid(r, currency="USD")], "recorded as a currency mismatch, not paid"),
        (
            [paid, lambda r: paid(r, "evt_2")],
            "evt_2 payment.succeeded: recorded as an extra "
            "payment, refundable on order {number} (paid)",
        ),
        (
            [paid, refunded],
            "evt_refund refund.succeeded: refund applied to order {number}, now refunded",
        ),
        ([paid, paid], "evt_pay payment.succeeded: duplicate, applied before; nothing done"),
        (
            [refunded],
            "refund.succeeded: not applicable yet (An order that is placed cannot be "
            "refunded.); asked to retry",
        ),
        ([paid, lambda r: refunded(r, amount=3601)], "refused, the refund is more than was paid"),
        (
            [lambda r: {**paid(r), "type": "customer.updated"}],
            "customer.updated: ignored, not an event that changes an order",
        ),
    ],
)
def test_each_webhook_log_line_says_what_the_event_did(client, servers, link, caplog, events, said):
    """Before: ``webhook payment.succeeded Created``, whatever the event did."""
    reference = reference_of(servers, link)
    caplog.set_level(logging.INFO, logger="webapp.webhooks")
    for event in events:
        deliver(client, event(reference))
    lines = [r.getMessage() for r in caplog.records if r.name == "webapp.webhooks.views"]
    assert len(lines) == len(events)
    assert said.format(number=number_of(servers)) in lines[-1], lines
    assert all(reference not in line and link not in line for line in lines)


def test_find_order_shows_the_reference_support_sees_at_the_provider(app, servers, link):
    reference = reference_of(servers, link)
    found = app.test_cli_runner().invoke(args=["orders", "find", number_of(servers)])
    assert found.exit_code == 0 and f"payment reference: {reference}" in found.output
    assert link.rsplit("/", 1)[1] not in found.output
