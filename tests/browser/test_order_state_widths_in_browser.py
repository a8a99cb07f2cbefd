"""The browser twin of tests/orders/test_order_state_words.py: every state
of an order's money × its order, cancel and refund pages, in Chromium at desktop width and
on a 375 px phone, where the layout differs. The same headline and the same money sentence,
shown, at both widths, and nothing wider than the phone. Was: after refunding everything,
"placed" at 1280 px and "Your order is refunded" at 375 px under "will be applied shortly"."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.shop import PHONE
from tests.browser.test_accessibility_and_layout import assert_fits_the_screen
from tests.orders.test_order_state_words import NOT_CANCELLED, PAGES, TABLE
from tests.support.money_states import STATES, put_order_in


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_every_page_about_an_order_says_the_same_words_at_both_widths(new_page, shop, device):
    page = new_page(**(PHONE if device == "phone" else {}))
    for state, (words, pages) in TABLE.items():
        key = put_order_in(shop.servers.engine, STATES[state])
        for name in PAGES:
            page.goto(f"{shop.url}/orders/{key}" + ("" if name == "order" else f"/{name}"))
            status, headline = (200, words.headline) if name == "order" else getattr(pages, name)
            # a cancelled order's cancel page: the order itself
            if status == 303:
                headline = words.headline
            where = f"{state}, {name} page, {device}"
            expect(page.locator("h1"), where).to_have_text(headline)
            if (name, pages.cancel) == ("cancel", NOT_CANCELLED):
                expect(page.locator("#money-state"), where).to_have_count(0)
            else:
                expect(page.locator("#money-state"), where).to_be_visible()
                expect(page.locator("#money-state"), where).to_have_text(words.money)
            if name == "order" or status == 303:
                expect(page.locator(".summary .status"), where).to_have_text(words.status)
            if device == "phone":
                assert_fits_the_screen(page)
