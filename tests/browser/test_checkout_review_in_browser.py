"""Checkout in two steps in headless Chromium: the details, then a review of what will be
charged, whose Place order places the order. However the user goes Back and forward
between the steps, and from the order back to them, one order is placed and the page lands
on it: every page of the checkout carries the token the details page was issued."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.shop import (
    CUSTOMER,
    Shop,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
)
from tests.browser.test_examples_in_browser import click_twice


def form_token(page: Page) -> str:
    """The token the page's form that places the order (or leads to it) carries."""
    return page.locator("form[data-submit-once] input[name=form_token]").input_value()


def details(page: Page, shop: Shop) -> str:
    """The details, filled in; the token their page was issued."""
    open_form(page, shop)
    fill_form(page)
    return form_token(page)


def expect_details_as_typed(page: Page) -> None:
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")
    expect(page.get_by_label("Full name")).to_have_value(CUSTOMER["name"])
    expect(page.get_by_label("Quantity")).to_have_value(CUSTOMER["quantity"])


def place(page: Page) -> None:
    page.get_by_role("button", name="Place order").click()


def test_details_review_back_forward_place_makes_one_order(page, shop):
    token = details(page, shop)
    continue_to_review(page)
    expect(page.locator("#review-quantity")).to_have_text(CUSTOMER["quantity"])
    total = page.locator("#review-total").inner_text()
    assert form_token(page) == token
    page.go_back()
    expect_details_as_typed(page)
    assert form_token(page) == token
    # Forward: the review as it was, from the browser's cache
    page.go_forward()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")
    assert form_token(page) == token
    place(page)
    number = expect_confirmation(page, already_placed=False)
    expect(page.locator(".summary")).to_contain_text(total)
    assert shop.orders() == [number]


def test_place_back_back_continue_place_lands_on_the_same_order(page, shop):
    token = details(page, shop)
    continue_to_review(page)
    # a double click, 20 ms apart: one order
    mark = shop.posts_received()
    click_twice(page, page.get_by_role("button", name="Place order"))
    first = expect_confirmation(page, already_placed=None)
    assert shop.posts_since(mark, at_least=1) >= 1
    # Back: the review; Back again: the details as typed, with the spent token
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")
    page.go_back()
    expect_details_as_typed(page)
    assert form_token(page) == token
    continue_to_review(page)
    assert form_token(page) == token
    place(page)
    again = expect_confirmation(page, already_placed=True)
    assert again == first and shop.orders() == [first]


def test_edit_on_the_review_keeps_the_input_and_places_one_order(page, shop):
    token = details(page, shop)
    continue_to_review(page)
    page.get_by_role("button", name="Edit").click()
    expect_details_as_typed(page)
    assert form_token(page) == token
    page.get_by_label("Quantity").fill("3")
    continue_to_review(page)
    expect(page.locator("#review-quantity")).to_have_text("3")
    place(page)
    number = expect_confirmation(page, already_placed=False)
    assert shop.orders() == [number]
