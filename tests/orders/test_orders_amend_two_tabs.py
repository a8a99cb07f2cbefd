"""Two tabs update the same unpaid order: each page carries the order's version it shows,
so the tab drawn before the other's update landed is told, with the order as it is now and
its own details kept, instead of silently writing over the update it never saw."""

from __future__ import annotations

from html import unescape

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, hidden, order_count
from tests.faults.steps import open_form, submit
from tests.support.order_buttons import buttons, landed, press

# in scripts/test --quick
pytestmark = pytest.mark.quick

FIRST_TAB = {**VALID, "quantity": "5", "address": "1 Other Street\nLeeds LS1 1AA"}
SECOND_TAB = {**VALID, "quantity": "9", "address": "7 Second Row\nYork YO1 7HH"}
TOLD = "was changed since you opened this page"


def two_tabs_offering_update(client) -> tuple[str, str, str]:
    """Place VALID, then send its used form twice with other details (Back + edit, in two
    tabs): the order's path and the two pages offering "Update order N", both drawn from
    the order as placed."""
    tokens = open_form(client)
    path = landed(submit(client, tokens))
    first, second = (submit(client, tokens, **details) for details in (FIRST_TAB, SECOND_TAB))
    assert first.status_code == second.status_code == 409
    return path, first.get_data(as_text=True), second.get_data(as_text=True)


def update(client, page: str, details: dict[str, str]):
    """Press Update on ``page`` as a browser does: with the order's version it carries."""
    version = hidden(page, "submit_once_version")
    return press(client, page, "update-order", submit_once_version=version, **details)


def the_order(servers) -> tuple[int, str, int, int]:
    """The order's quantity, address and version, and how many updates landed."""
    with servers.engine.connect() as conn:
        quantity, address, version = conn.execute(
            text("SELECT quantity, shipping_address, version FROM orders")
        ).one()
        updates = conn.scalar(text("SELECT count(*) FROM order_amendments"))
    return quantity, address, version, updates


def test_the_stale_tab_is_told_with_the_order_as_it_is_now_and_keeps_its_details(client, servers):
    path, first, second = two_tabs_offering_update(client)
    assert hidden(first, "submit_once_version") == hidden(second, "submit_once_version") == "1"
    assert landed(update(client, first, FIRST_TAB)) == path
    stale = update(client, second, SECOND_TAB)
    page = unescape(stale.get_data(as_text=True))
    assert stale.status_code == 409 and TOLD in page and flashed(stale) == []
    # Both versions: the order as the first tab left it, and the second tab's details.
    assert "It now has: 5 ×" in page and "to 1 Other Street, Leeds LS1 1AA." in page
    assert 'value="9"' in page and "7 Second Row\nYork YO1 7HH" in page
    assert the_order(servers) == (5, FIRST_TAB["address"], 2, 1)
    # Update pressed again on the page that told it: the order takes the details the
    # shopper has now seen it beside, with the same form token.
    assert buttons(page)["update-order"].token == buttons(second)["update-order"].token
    assert hidden(page, "submit_once_version") == "2"
    assert landed(update(client, page, SECOND_TAB)) == path
    assert the_order(servers) == (9, SECOND_TAB["address"], 3, 2) and order_count(servers) == 1


def test_the_same_update_sent_again_lands_on_the_order_and_is_not_told_stale(client, servers):
    path, first, _ = two_tabs_offering_update(client)
    answers = [update(client, first, FIRST_TAB) for _ in range(2)]
    assert [landed(answer) for answer in answers] == [path, path]
    assert flashed(answers[1]) == ["amended", "amended_already"]
    assert the_order(servers) == (5, FIRST_TAB["address"], 2, 1)
