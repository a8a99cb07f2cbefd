"""A used order form resubmitted with other details (Back + edit, a duplicated tab, a
Turbo snapshot) is told so with those details back, and places nothing by itself.
Written with the library's pytest plugin (flask_submit_once.testing's ``once_forms``)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, order_count, order_page
from tests.support.order_buttons import buttons, press

# in scripts/test --quick
pytestmark = pytest.mark.quick

EDITED = {**VALID, "quantity": "5", "address": "1 Other Street\nLeeds LS1 1AA"}


def addresses(servers) -> list[str]:
    with servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT shipping_address FROM orders ORDER BY id")))


def test_back_edit_and_submit_is_told_and_the_new_details_are_kept(once_forms, servers):
    page = order_page(once_forms)
    placed = page.submit(VALID)
    assert placed.status_code == 303
    # Back, change quantity and address, submit
    again = page.submit(EDITED)
    html = again.get_data(as_text=True)
    assert again.status_code == 409, html[:300]
    assert "already used for order" in html and "nothing new was placed" in html
    # a link to the order already placed
    assert placed.headers["Location"] in html
    assert "1 Other Street" in html and 'value="5"' in html
    # beside "Update order N" (test_orders_amend)
    fresh = buttons(html)["place-another"].token
    assert fresh and fresh != page.token and order_count(servers) == 1
    # Pressing "Place another order" is what places the second order, with the new details.
    second = press(once_forms.client, html, "place-another", **EDITED)
    assert second.status_code == 303 and order_count(servers) == 2
    assert addresses(servers)[1] == EDITED["address"]


def test_the_same_details_still_land_on_the_order_whichever_worker_remembers_it(
    once_forms, servers, make_app
):
    page = order_page(once_forms)
    placed = page.submit(VALID)
    # no in-process memory of this submit
    other_worker = make_app().test_client()
    repeat = page.submit(VALID)
    assert repeat.headers["Location"] == placed.headers["Location"]
    assert "already_placed" in flashed(repeat)
    changed = page.submit(EDITED, client=once_forms.clone())
    assert changed.status_code == 409
    for client in (other_worker,):
        client.set_cookie("session", once_forms.client.get_cookie("session").value)
        repeat = page.submit(VALID, client=client)
        assert repeat.headers["Location"] == placed.headers["Location"]
        assert "already_placed" in flashed(repeat)
        assert page.submit(EDITED, client=client).status_code == 409
    assert order_count(servers) == 1


def test_the_same_order_written_differently_is_a_repeat_not_other_details(once_forms, servers):
    """A name sent as " José " or as a decomposed (NFD) "José", or quantity "02", is what
    the first submit stored, so the resubmit lands on its order (before: 409 "other
    details", inviting the very second order the token exists to prevent)."""
    first = {**VALID, "name": "José Lovelace", "quantity": "2"}
    page = order_page(once_forms)
    placed = page.submit(first)
    assert placed.status_code == 303
    for written in (
        {"name": "  José Lovelace "},
        {"name": "Jose\u0301 Lovelace"},
        {"quantity": "02"},
    ):
        again = page.submit({**first, **written})
        assert again.status_code == 303, (written, again.status_code)
        assert again.headers["Location"] == placed.headers["Location"]
    assert order_count(servers) == 1
