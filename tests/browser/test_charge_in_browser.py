"""A card checkout in headless Chromium: a double click while the provider takes 5 s to
answer charges the card once, and the customer lands on the paid order."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import text

from tests.browser.shop import ORDER_URL, Shop, continue_to_review, fill_form, open_form
from tests.support.payments import PAYS


@pytest.fixture(scope="module")
def card_shop(servers, provider):
    with Shop(servers, **provider.env()) as live:
        yield live


@pytest.mark.parametrize("javascript", [True, False], ids=["with-js", "without-js"])
def test_a_double_click_while_the_provider_takes_5_s_charges_once_and_lands_on_the_paid_order(
    new_page, card_shop, provider, servers, javascript
):
    provider.faults(slow=5)
    try:
        page = new_page(java_script_enabled=javascript)
        open_form(page, card_shop)
        fill_form(page)
        continue_to_review(page)
        page.get_by_label("Card number").fill(PAYS)
        button = page.get_by_role("button", name="Place order")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box is not None
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        mark = card_shop.posts_received()
        # A person's double click: two real clicks on the button, 60 ms apart (the mouse,
        # not the button's element: the first click starts the navigation).
        page.mouse.click(x, y)
        page.wait_for_timeout(60)
        page.mouse.click(x, y)
        expect(page).to_have_url(ORDER_URL, timeout=40_000)
        expect(page.locator("dl.summary")).to_contain_text("Paid")
    finally:
        provider.faults()
    posts = card_shop.posts_since(mark, at_least=1 if javascript else 2)
    key = re.search(ORDER_URL, page.url).group(1)
    with servers.engine.connect() as conn:
        status, reference = conn.execute(
            text("SELECT status, payment_reference FROM orders WHERE public_id = :k"), {"k": key}
        ).one()
        count = conn.scalar(text("SELECT count(*) FROM orders"))
    assert (status, count) == ("paid", 1)
    assert len(provider.succeeded(reference)) == 1
    # without the script both clicks are sent: the second waited
    if not javascript:
        assert posts >= 2, f"only {posts} POST reached the server: not a double submit"
