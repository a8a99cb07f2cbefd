"""A number of any length in any number field of any form: the field's own error (422),
the form's token unspent, nothing written. Numbers of 309 to 4,300 digits once passed
int() and then broke float() inside WTForms' NumberRange (a 500); past 4,300 int()
itself refuses them."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.conftest import VALID, hidden
from tests.faults.steps import open_form, submit
from tests.support.order_buttons import buttons, landed

#: The lengths that were a 500 on the order and update forms, and the edges around them.
LENGTHS = [309, 1000, 4300]
ORDER_ERRORS = {
    "quantity": "Choose a quantity from 1 to 99.",
    "product": "Choose one of the products on sale.",
}


def written(servers) -> tuple[int, int, int]:
    """Orders, updates and refund requests in the database."""
    with servers.engine.connect() as conn:
        return tuple(
            conn.scalar(text(f"SELECT count(*) FROM {table}"))
            for table in ("orders", "order_amendments", "refund_requests")
        )


def order_form(client, servers):
    """The order form as drawn: where it posts, what it sends, and its token."""
    tokens = open_form(client)
    return "/orders", {**VALID, **tokens}, tokens["form_token"]


def update_form(client, servers):
    """The page that offers "Update order N" (Back + edit of a placed order)."""
    tokens = open_form(client)
    landed(submit(client, tokens))
    html = submit(client, tokens, quantity="5").get_data(as_text=True)
    update = buttons(html)["update-order"]
    data = {**VALID, "csrf_token": hidden(html, "csrf_token"), "form_token": update.token}
    return update.action, data, update.token


def refund_form(client, servers):
    """The refund form of an order paid €36.00."""
    tokens = open_form(client)
    path = landed(submit(client, tokens))
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = 'paid', paid_cents = 3600"))
    html = client.get(f"{path}/refund").get_data(as_text=True)
    token = hidden(html, "form_token")
    data = {"csrf_token": hidden(html, "csrf_token"), "form_token": token, "amount": "1"}
    return f"{path}/refunds", data, token


FIELDS = [
    pytest.param(order_form, "quantity", ORDER_ERRORS["quantity"], id="order-quantity"),
    pytest.param(order_form, "product", ORDER_ERRORS["product"], id="order-product"),
    pytest.param(update_form, "quantity", ORDER_ERRORS["quantity"], id="update-quantity"),
    pytest.param(update_form, "product", ORDER_ERRORS["product"], id="update-product"),
    pytest.param(refund_form, "amount", "You can refund at most €36.00.", id="refund-amount"),
]


@pytest.mark.parametrize("digits", LENGTHS)
@pytest.mark.parametrize(("form", "field", "error"), FIELDS)
def test_a_number_of_any_length_is_the_fields_own_error_and_spends_nothing(
    client, servers, form, field, error, digits
):
    url, data, token = form(client, servers)
    before = written(servers)
    response = client.post(url, data={**data, field: "9" * digits})
    html = response.get_data(as_text=True)
    assert response.status_code == 422, html[:800]
    assert error in html
    # the form's token, unspent, for the fixed submit
    assert token in html
    assert written(servers) == before
    # and it still works once
    assert client.post(url, data=data).status_code == 303
