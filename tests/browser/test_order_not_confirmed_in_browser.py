"""The order a customer was sent to is gone when the confirmation loads (an
asynchronous standby promoted without it): the page says so and gives the
details back into a fresh form, which the customer submits themselves."""

from __future__ import annotations

from playwright.sync_api import expect
from sqlalchemy import text

from tests.browser.shop import (
    CUSTOMER,
    ORDER_URL,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
)


def test_a_lost_order_offers_the_details_back_in_a_fresh_form_and_places_only_when_asked(
    page, shop, servers
):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    sent_token = page.locator("form[data-submit-once] input[name=form_token]").input_value()

    def lose_the_order(route):
        # The order was placed (a 303, or under htmx a 200 with HX-Redirect); before the
        # confirmation is read the order is gone.
        response = route.fetch(max_redirects=0)
        assert response.status == 303 or "hx-redirect" in response.headers
        with servers.engine.begin() as conn:
            conn.execute(text("DELETE FROM orders"))
        route.fulfill(response=response)

    page.route("**/orders", lose_the_order)
    page.get_by_role("button", name="Place order").click()
    expect(page).to_have_url(ORDER_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("There is no order at this link")
    page.unroute("**/orders")
    offer = page.locator("#restore-offer")
    expect(offer).to_be_visible()
    mark = shop.posts_received()
    offer.get_by_role("link", name="Put my details into a new order form").click()

    expect(page.locator("#restored-notice")).to_be_visible()
    expect(page.get_by_label("Full name")).to_have_value(CUSTOMER["name"])
    expect(page.get_by_label("Email")).to_have_value(CUSTOMER["email"])
    expect(page.get_by_label("Shipping address")).to_have_value(CUSTOMER["address"])
    assert page.locator("form[data-submit-once] input[name=form_token]").input_value() != sent_token
    assert shop.posts_since(mark, at_least=0, timeout=1) == 0, "nothing sent by itself"
    assert shop.orders() == []

    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    number = expect_confirmation(page, already_placed=False)
    assert shop.orders() == [number]
    # The copy is used up: reloading the form later brings nothing back.
    open_form(page, shop)
    page.reload()
    expect(page.locator("#restored-notice")).to_be_hidden()
    expect(page.get_by_label("Full name")).to_have_value("")
