"""Scenario 7 of docs/TESTING.md's browser table: with JavaScript off (no submit-once.js,
no page scripts at all), a single submit, a double click and Back + submit again
still make one order each time, and the user lands on it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.shop import (
    CUSTOMER,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
)


@pytest.fixture
def page(new_page):
    return new_page(java_script_enabled=False)


def test_without_javascript_a_submit_places_one_order(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    mark = shop.posts_received()
    page.get_by_role("button", name="Place order").click()
    number = expect_confirmation(page, already_placed=False)
    assert shop.posts_since(mark, at_least=1) == 1
    assert shop.orders() == [number]


def test_without_javascript_a_double_click_sends_two_posts_and_places_one_order(page, slow_shop):
    open_form(page, slow_shop)
    fill_form(page)
    continue_to_review(page)
    mark = slow_shop.posts_received()
    button = page.get_by_role("button", name="Place order")
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    # Two real mouse clicks 20 ms apart: nothing in the page stops the second,
    # so Chromium abandons the first POST and sends the form again.
    page.mouse.click(x, y)
    page.wait_for_timeout(20)
    page.mouse.click(x, y)
    number = expect_confirmation(page, already_placed=None)
    posts = slow_shop.posts_since(mark, at_least=2)
    assert posts == 2, f"the server read {posts} POSTs, not the two a double click sends"
    assert slow_shop.orders() == [number]


def test_without_javascript_back_and_submit_again_shows_the_order_already_placed(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    number = expect_confirmation(page, already_placed=False)
    mark = shop.posts_received()
    page.go_back()
    expect(page.locator("#order-review")).to_contain_text(CUSTOMER["name"])
    page.get_by_role("button", name="Place order").click()
    assert expect_confirmation(page, already_placed=True) == number
    assert shop.posts_since(mark, at_least=1) == 1
    assert shop.orders() == [number]


def test_without_javascript_back_edit_and_submit_again_is_told_not_dropped(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    number = expect_confirmation(page, already_placed=False)
    page.go_back()
    page.go_back()
    page.get_by_label("Quantity").fill("5")
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("#form-message")).to_contain_text("already used for order")
    expect(page.get_by_label("Quantity")).to_have_value("5")
    page.locator("#placed-order-link").click()
    assert expect_confirmation(page, already_placed=False) == number
    assert shop.orders() == [number]
