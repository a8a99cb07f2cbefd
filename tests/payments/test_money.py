"""Money is checked: a payment pays its order only with the order's amount and
currency; every other payment is recorded, and money kept is refundable or
reported by ``payments reconcile``."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.cancel.test_cancel import cancel_form
from tests.orders.test_orders import open_form, order_path, submit
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of, refunded

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def order(client) -> str:
    """The private link of an order placed through the form (€36.00)."""
    return order_path(submit(client, open_form(client)))


def key(order: str) -> str:
    return order.rsplit("/", 1)[1]


def row(servers):
    with servers.engine.connect() as conn:
        return tuple(
            conn.execute(
                text("SELECT status, paid_cents, refunded_cents, currency FROM orders")
            ).one()
        )


def events(servers) -> list[tuple]:
    with servers.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT event_id, amount_cents, currency, problem"
                    " FROM payment_events ORDER BY id"
                )
            )
        ]


def test_orders_carry_their_total_and_currency(client, order, servers):
    assert row(servers) == ("placed", 0, 0, "EUR")
    assert "€36.00" in client.get(order).text


@pytest.mark.parametrize(
    "amount, currency, problem",
    [
        # a 1-cent payment for a €36 order
        (1, "EUR", "amount_mismatch"),
        (3599, "EUR", "amount_mismatch"),
        (3601, "EUR", "amount_mismatch"),
        (3600, "USD", "currency_mismatch"),
        (3600, "usd", "currency_mismatch"),
    ],
)
def test_a_payment_that_does_not_match_is_recorded_and_pays_nothing(
    client, order, servers, amount, currency, problem
):
    response = deliver(client, paid(reference_of(servers, order), amount=amount, currency=currency))
    # 200: recorded; the provider must not retry an event that will never match.
    assert response.status_code == 200
    assert response.get_json() == {
        "event": "evt_pay",
        "result": "recorded",
        "problem": problem,
        "order_status": "placed",
    }
    assert row(servers) == ("placed", 0, 0, "EUR")
    assert events(servers) == [("evt_pay", amount, currency.upper(), problem)]
    assert "Request a refund" not in client.get(order).text
    again = deliver(client, paid(reference_of(servers, order), amount=amount, currency=currency))
    assert again.get_json()["result"] == "duplicate" and len(events(servers)) == 1


def test_the_currency_is_read_in_any_case(client, order, servers):
    response = deliver(client, paid(reference_of(servers, order), currency="eur"))
    assert response.get_json()["result"] == "applied"
    assert row(servers) == ("paid", 3600, 0, "EUR")
    assert events(servers) == [("evt_pay", 3600, "EUR", None)]


def test_a_payment_after_a_cancel_is_recorded_and_its_refund_page_opens(client, order, servers):
    tokens = cancel_form(client, order)
    assert client.post(f"{order}/cancel", data=tokens).status_code == 303
    response = deliver(client, paid(reference_of(servers, order)))
    assert response.status_code == 200
    assert response.get_json() == {
        "event": "evt_pay",
        "result": "recorded",
        "problem": "after_cancel",
        "order_status": "cancelled",
    }
    assert row(servers) == ("cancelled", 3600, 0, "EUR")
    assert "Request a refund" in client.get(order).text
    page = client.get(f"{order}/refund")
    assert page.status_code == 200 and "Up to €36.00." in page.text


def test_a_second_payment_on_a_paid_order_is_recorded_and_refundable(client, order, servers):
    deliver(client, paid(reference_of(servers, order), "evt_1"))
    second = deliver(client, paid(reference_of(servers, order), "evt_2"))
    assert second.status_code == 200
    assert second.get_json()["problem"] == "extra_payment"
    assert row(servers) == ("paid", 7200, 0, "EUR")
    assert "Up to €72.00." in client.get(f"{order}/refund").text
    last = deliver(client, refunded(reference_of(servers, order), amount=7200))
    assert last.get_json()["order_status"] == "refunded"
    # refunded <= paid holds
    assert row(servers) == ("refunded", 7200, 7200, "EUR")


def test_reconcile_payments_lists_money_kept_without_an_order(app, client, order, servers):
    deliver(client, paid(reference_of(servers, order), "evt_1cent", amount=1))
    deliver(client, paid(reference_of(servers, order), "evt_ok"))
    deliver(client, paid(reference_of(servers, order), "evt_twice"))
    result = app.test_cli_runner().invoke(args=["payments", "reconcile"])
    assert result.exit_code == 0, result.output
    assert "payments applied:      7200 cents" in result.output
    assert "kept without an order: 1 payments" in result.output
    assert "event evt_1cent: 1 EUR amount_mismatch" in result.output
    assert key(order) not in result.output
    # money paid that no event explains
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET paid_cents = paid_cents + 1"))
    broken = app.test_cli_runner().invoke(args=["payments", "reconcile"])
    assert broken.exit_code == 1 and "MISMATCH" in broken.output
