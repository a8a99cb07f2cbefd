"""The order form in headless Chromium: every way a browser sends a form more
than once still places one order, and the user ends up looking at it.

Scenario numbers are those of docs/TESTING.md's table. Each test checks what the user sees
(address, heading, order number), how many POSTs the server really read (so a
double submit cannot pass by having sent one), and the orders in PostgreSQL.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Route, expect

from tests.browser.shop import (
    CUSTOMER,
    Shop,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
    submit_spaced,
)
from tests.conftest import token_keys
from webapp.orders.messages import STILL_RUNNING


def place_order_button(page):
    return page.get_by_role("button", name="Place order")


def token_sent(page) -> str:
    """The token of the form that places the order (the review's, or the form again)."""
    return page.locator("form[data-submit-once] input[name=form_token]").input_value()


# 1
def test_single_submit_lands_on_the_confirmation_of_one_order(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    mark = shop.posts_received()
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=False)
    expect(page.locator(".summary")).to_contain_text(CUSTOMER["name"])
    assert shop.posts_since(mark, at_least=1) == 1
    assert shop.orders() == [number]


# 2, 3
@pytest.mark.parametrize(
    ("times", "spacing_ms"),
    [(2, 20), (3, 10), (5, 50), (5, 200)],
    ids=["double-20ms", "triple-10ms", "five-50ms", "five-200ms"],
)
def test_repeated_submits_in_flight_make_one_order_and_the_user_lands_on_it(
    page, slow_shop, times, spacing_ms
):
    open_form(page, slow_shop)
    fill_form(page)
    continue_to_review(page)
    mark = slow_shop.posts_received()
    submit_spaced(page, times, spacing_ms)
    # The browser shows the answer to the last POST, whichever the server took first.
    number = expect_confirmation(page, already_placed=None)
    # Chromium may cancel a repeat before sending it, so at least two, not all.
    posts = slow_shop.posts_since(mark, at_least=2)
    assert posts >= 2, f"only {posts} POST reached the server: not a repeated submit"
    assert slow_shop.orders() == [number]


# 4
def test_reloading_the_confirmation_places_nothing_new(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=False)
    mark = shop.posts_received()
    page.reload()
    assert expect_confirmation(page, already_placed=False) == number
    assert shop.posts_since(mark, at_least=0, timeout=0) == 0
    assert shop.orders() == [number]


def test_reload_while_the_submit_is_in_flight_gives_back_the_form_as_sent(page, slow_shop):
    open_form(page, slow_shop)
    fill_form(page)
    continue_to_review(page)
    sent_token = token_sent(page)
    mark = slow_shop.posts_received()
    place_order_button(page).click(no_wait_after=True)
    assert slow_shop.posts_since(mark, at_least=1) == 1
    # The reload button: Chromium drops the pending POST (the server still
    # completes it) and loads a blank form with a fresh token; submit-once.js
    # puts back what was sent, token included, and says so.
    press_reload(page)
    expect(page.locator("#interrupted-notice")).to_be_visible()
    expect(page.locator("#order-review")).to_contain_text(CUSTOMER["name"])
    assert token_sent(page) == sent_token
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=True)
    assert slow_shop.posts_since(mark, at_least=2) == 2
    assert slow_shop.orders() == [number]


def test_a_duplicate_past_the_wait_gets_the_form_as_sent_and_submitting_again_lands_on_it(
    servers, new_page
):
    # The first submit outlasts how long a duplicate waits for it: the duplicate gets
    # the form back (503) as sent, same token, saying the order is still being placed
    # and to press Place order again (before 0.10: a page of its own, "reload").
    with Shop(servers, TEST_PAUSE_AFTER_CONSUME="4", SUBMIT_ONCE_WAIT_SECONDS="0.5") as shop:
        page = new_page()
        open_form(page, shop)
        fill_form(page)
        continue_to_review(page)
        sent_token = token_sent(page)
        mark = shop.posts_received()
        # The duplicate leaves the browser once the first holds the token: sent only
        # 300 ms apart, it could reach a worker and take the token first (CI, at load).
        page.route("**/orders", hold_the_second_post_until_the_first_is_paused(shop))
        submit_spaced(page, 2, 300)
        expect(page.locator("#form-message")).to_contain_text(STILL_RUNNING)
        expect(page.get_by_label("Full name")).to_have_value(CUSTOMER["name"])
        expect(page.get_by_label("Shipping address")).to_have_value(CUSTOMER["address"])
        assert token_sent(page) == sent_token
        assert shop.posts_since(mark, at_least=2) == 2
        # "press Place order again in a few seconds"
        assert len(shop.wait_for_orders(1)) == 1
        place_order_button(page).click()
        number = expect_confirmation(page, already_placed=True)
        assert shop.posts_since(mark, at_least=3) == 3
        assert shop.orders() == [number]


def hold_the_second_post_until_the_first_is_paused(shop: Shop):
    posts = 0

    def handle(route: Route) -> None:
        nonlocal posts
        if route.request.method == "POST":
            posts += 1
            if posts == 2:
                shop.wait_for_pause("consume", 0)
        route.continue_()

    return handle


def press_reload(page) -> None:
    """What the reload button does, without waiting for a load that the pending
    navigation it cancels would report as aborted (page.reload() raises then)."""
    page.context.new_cdp_session(page).send("Page.reload")


# 5
def test_back_to_the_form_and_submit_again_shows_the_order_already_placed(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    spent_token = token_sent(page)
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=False)
    mark = shop.posts_received()

    page.go_back()
    expect(page.locator("#order-review")).to_contain_text(CUSTOMER["name"])
    place_order_button(page).click()
    assert expect_confirmation(page, already_placed=True) == number
    assert shop.posts_since(mark, at_least=1) == 1
    assert shop.orders() == [number]

    # The notice offers a fresh form, with a new token: a new order is a new intent.
    page.locator("#already-placed").get_by_role("link", name="Start a new order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")
    assert token_sent(page) != spent_token
    fill_form(page, name="Charles Babbage")
    continue_to_review(page)
    place_order_button(page).click()
    second = expect_confirmation(page, already_placed=False)
    assert shop.orders() == [number, second]


def test_back_edit_and_submit_again_is_told_not_dropped_and_places_nothing(page, shop):
    """htmx (JavaScript on): Back to the submitted form, another address, submit: the
    409 fragment says the form was used for the order, keeps the new address, links the
    order; nothing is placed until the customer submits that form."""
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=False)
    page.go_back()
    page.go_back()
    expect(page.get_by_label("Full name")).to_have_value(CUSTOMER["name"])
    page.get_by_label("Shipping address").fill("1 Other Street\nLeeds LS1 1AA")
    mark = shop.posts_received()
    continue_to_review(page)
    place_order_button(page).click()
    message = page.locator("#form-message")
    expect(message).to_contain_text("already used for order")
    expect(page.locator("#placed-order-link")).to_have_attribute("href", f"/orders/{number}")
    expect(page.get_by_label("Shipping address")).to_have_value("1 Other Street\nLeeds LS1 1AA")
    assert shop.posts_since(mark, at_least=1) == 1 and shop.orders() == [number]
    # The customer's own choice: a second order (beside "Update order N", test_amend_in_browser).
    page.get_by_role("button", name="Place another order").click()
    second = expect_confirmation(page, already_placed=False)
    assert shop.orders() == [number, second]


# 6
def test_two_tabs_each_submitted_once_place_two_orders(new_page, shop):
    first = new_page()
    # same browser, same session cookie
    second = first.context.new_page()
    for tab, name in ((first, "Ada Lovelace"), (second, "Charles Babbage")):
        open_form(tab, shop)
        fill_form(tab, name=name)
        continue_to_review(tab)
    mark = shop.posts_received()
    place_order_button(first).click()
    place_order_button(second).click()
    one = expect_confirmation(first, already_placed=False)
    two = expect_confirmation(second, already_placed=False)
    expect(first.locator(".summary")).to_contain_text("Ada Lovelace")
    expect(second.locator(".summary")).to_contain_text("Charles Babbage")
    assert one != two
    assert shop.posts_since(mark, at_least=2) == 2
    assert sorted(shop.orders()) == sorted([one, two])


# 8
def test_expired_form_comes_back_with_every_field_filled_in(servers, new_page, rdb):
    with Shop(servers, SUBMIT_ONCE_TTL_SECONDS="3") as shop:
        page = new_page()
        open_form(page, shop)
        fill_form(page, quantity="3")
        continue_to_review(page)
        wait_until_tokens_expired(rdb)
        place_order_button(page).click()
        expect(page.locator("#form-message")).to_contain_text("expired")
        expect(page.get_by_label("Product")).to_have_value("1")
        expect(page.get_by_label("Quantity")).to_have_value("3")
        expect(page.get_by_label("Full name")).to_have_value(CUSTOMER["name"])
        expect(page.get_by_label("Email")).to_have_value(CUSTOMER["email"])
        expect(page.get_by_label("Shipping address")).to_have_value(CUSTOMER["address"])
        assert shop.orders() == []
        place_order_button(page).click()
        number = expect_confirmation(page, already_placed=False)
        assert shop.orders() == [number]


def wait_until_tokens_expired(rdb, timeout: float = 15) -> None:
    """Poll Redis until every form token issued so far has expired."""
    import time

    deadline = time.monotonic() + timeout
    while token_keys(rdb):
        assert time.monotonic() < deadline, "form tokens did not expire"
        time.sleep(0.1)
    # and the CSRF token's whole-second timestamp with them
    time.sleep(1.1)


# 9
def test_invalid_input_is_shown_beside_the_fields_then_fixed_places_one_order(page, shop):
    open_form(page, shop)
    fill_form(page, name="", email="ada(at)example")
    mark = shop.posts_received()
    # the details step: a typo comes back (422) on the details page, nothing sent to place
    page.get_by_role("button", name="Continue").click()
    summary = page.locator("#error-summary")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("link")).to_have_text(
        ["Full name: Enter your name.", "Email: Enter an email address like name@example.com."]
    )
    name, email = page.get_by_label("Full name"), page.get_by_label("Email")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_accessible_description("Enter your name.")
    expect(email).to_have_accessible_description("Enter an email address like name@example.com.")
    expect(email).to_have_value("ada(at)example")
    expect(page.get_by_label("Shipping address")).to_have_value(CUSTOMER["address"])
    assert shop.orders() == []

    name.fill(CUSTOMER["name"])
    email.fill(CUSTOMER["email"])
    continue_to_review(page)
    place_order_button(page).click()
    number = expect_confirmation(page, already_placed=False)
    assert shop.posts_since(mark, at_least=1) == 1
    assert shop.orders() == [number]
