"""Back + edit in Chromium: Back to the placed order's form, change the quantity,
submit: the page offers "Update order N with these details" beside "Place another
order" and "See order N"; a double click on Update updates the order once and lands on
it, with JavaScript (htmx) and without."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import text

from tests.browser.shop import continue_to_review, expect_confirmation, show_confirmation


def amendments(shop) -> list[dict]:
    with shop.servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT changes FROM order_amendments ORDER BY id")))


def quantities(shop) -> list[int]:
    with shop.servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT quantity FROM orders ORDER BY id")))


def double_click(page: Page, name: str) -> None:
    """Two real mouse clicks 20 ms apart on the button called ``name``."""
    button = page.get_by_role("button", name=name)
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    page.wait_for_timeout(20)
    page.mouse.click(x, y)


@pytest.mark.parametrize("javascript", [True, False], ids=["htmx", "no-javascript"])
def test_back_edit_and_update_changes_the_order_once_and_lands_on_it(new_page, shop, javascript):
    page = new_page(java_script_enabled=javascript)
    show_confirmation(page, shop)
    key = shop.orders()[0]
    number = page.locator("#order-number").inner_text()
    page.go_back()
    page.go_back()
    page.get_by_label("Quantity").fill("5")
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()

    expect(page.locator("#form-message")).to_contain_text(f"already used for order {number}")
    update = f"Update order {number} with these details"
    expect(page.get_by_role("button", name=update)).to_be_visible()
    expect(page.get_by_role("button", name="Place another order")).to_be_visible()
    expect(page.get_by_role("link", name=f"See order {number}")).to_have_attribute(
        "href", f"/orders/{key}"
    )
    # the typed input kept
    expect(page.get_by_label("Quantity")).to_have_value("5")

    double_click(page, update)
    assert expect_confirmation(page, already_placed=False) == key
    # With JavaScript the second click is swallowed; without, Chromium drops the first
    # POST for the second, which lands on the update the first made.
    expect(page.locator("#amended")).to_have_text(
        "We updated your order with your new details."
        if javascript
        else re.compile("We updated your order|This update was already made")
    )
    expect(page.locator(".summary")).to_contain_text("€90.00")
    assert quantities(shop) == [5]
    assert amendments(shop) == [{"quantity": [2, 5]}]


def test_an_update_that_got_no_answer_is_checked_at_its_own_address(page, shop):
    """The check asks with the token and the address of the button pressed: Update's,
    not the order form's (which would place nothing and answer 400)."""
    show_confirmation(page, shop)
    number = page.locator("#order-number").inner_text()
    page.go_back()
    page.go_back()
    page.get_by_label("Quantity").fill("5")
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    update = page.get_by_role("button", name=f"Update order {number} with these details")
    # the network drops it
    page.route("**/amendments", lambda route: route.abort())
    update.click()
    expect(page.locator("#submit-unknown")).to_be_visible()
    page.unroute("**/amendments")
    page.get_by_role("button", name="Check my order").click()
    # asked: not updated
    expect(page.locator("#submit-not-done")).to_be_visible()
    assert quantities(shop) == [2] and amendments(shop) == []
