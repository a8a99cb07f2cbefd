"""``flask --app webapp orders ship NUMBER``: an operator marks a paid order shipped through
the order state machine, which refuses the rest with a reason; who shipped it is
recorded; and from then on the customer's refund waits for review, with no SQL."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.app.test_logs import json_lines
from tests.cancel.test_cancel import cancel_form
from tests.orders.test_orders import open_form, order_path, submit
from tests.refunds.test_refund_form import open_refund_form, refund
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def order(client) -> str:
    """The private link of an order placed through the form (€36.00), not yet paid."""
    return order_path(submit(client, open_form(client)))


def pay(client, servers, order: str) -> None:
    assert deliver(client, paid(reference_of(servers, order))).status_code == 200


def number_of(servers, order: str) -> str:
    return row(servers, order)[0]


def row(servers, order: str) -> tuple[str, str, str | None]:
    """(order number, status, shipped_by) of the order at ``order``."""
    with servers.engine.connect() as conn:
        return tuple(
            conn.execute(
                text("SELECT order_number, status, shipped_by FROM orders WHERE public_id = :key"),
                {"key": order.rsplit("/", 1)[1]},
            ).one()
        )


def ship(app, number: str, *args: str):
    return app.test_cli_runner().invoke(args=["orders", "ship", number, *args])


def test_a_paid_order_is_shipped_by_its_number_and_who_shipped_it_is_recorded(
    app, client, servers, order
):
    pay(client, servers, order)
    number = number_of(servers, order)
    # as support reads it out
    typed = f"{number[:4].lower()}-{number[4:]}"
    result = ship(app, typed, "--by", "Ada")
    assert result.exit_code == 0, result.output
    assert f"Order {number} is shipped (by Ada)." in result.stdout
    assert row(servers, order) == (number, "shipped", "Ada")
    (line,) = [line for line in json_lines(result.stderr) if line.get("action")]
    assert (line["action"], line["operator"], line["order_number"]) == (
        "orders ship",
        "Ada",
        number,
    )
    # the private key is never logged
    assert order.rsplit("/", 1)[1] not in result.stderr

    again = ship(app, number, "--by", "Bob")
    assert again.exit_code == 0
    assert f"Order {number} was already shipped (by Ada); nothing changed." in again.stdout
    assert row(servers, order) == (number, "shipped", "Ada")
    assert not [line for line in json_lines(again.stderr) if line.get("action")]


@pytest.mark.parametrize(
    ("before", "said"),
    [
        (
            "placed",
            "An order that is placed cannot be shipped. Ship it once its payment has arrived.",
        ),
        (
            "cancelled",
            "An order that is cancelled cannot be shipped. The customer cancelled it: "
            "do not send it.",
        ),
    ],
)
def test_what_the_state_machine_refuses_is_refused_with_a_reason_and_nothing_written(
    app, client, servers, order, before, said
):
    if before == "cancelled":
        assert (
            client.post(f"{order}/cancellation", data=cancel_form(client, order)).status_code == 303
        )
    number = number_of(servers, order)
    result = ship(app, number, "--by", "Ada")
    assert result.exit_code == 1
    assert f"Order {number} was not shipped. {said}" in result.output
    assert row(servers, order) == (number, before, None)


def test_an_unknown_number_is_refused(app):
    result = ship(app, "2222222222")
    assert result.exit_code == 1
    assert (
        "No order has the number '2222222222' ('flask orders find' looks one up)." in result.output
    )


def test_once_shipped_a_refund_waits_for_review_then_an_operator_approves_it(
    app, client, servers, order
):
    """The refund-review flow from the commands alone (before: shipping took SQL)."""
    pay(client, servers, order)
    number = number_of(servers, order)
    assert ship(app, number).exit_code == 0
    key = order.rsplit("/", 1)[1]
    assert refund(client, key, open_refund_form(client, key), "10.00").status_code == 303
    waiting = app.test_cli_runner().invoke(args=["refunds", "reviews"])
    assert f"({number}; paid €36.00" in waiting.output
    request_id = waiting.output.split("request ", 1)[1].split(":", 1)[0]
    approved = app.test_cli_runner().invoke(args=["refunds", "approve", request_id])
    assert approved.exit_code == 0 and f"€10.00 for order {number}" in approved.output
