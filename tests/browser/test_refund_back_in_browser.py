"""Back to a refund form that was sent, and sent again as it stands,
lands on the request ("already requested") with the amount the page was sent with,
never on "Enter the amount to refund."."""

from __future__ import annotations

import re

from playwright.sync_api import expect
from sqlalchemy import text

from tests.browser.shop import ORDER_URL, show_confirmation


def test_back_to_a_sent_refund_form_keeps_the_amount_and_lands_on_already_requested(page, shop):
    show_confirmation(page, shop)
    key = ORDER_URL.search(page.url).group(1)
    with shop.servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'paid', "
                "paid_cents = unit_price_cents * quantity WHERE public_id = :k"
            ),
            {"k": key},
        )
    page.goto(f"{shop.url}/orders/{key}/refund")
    page.get_by_label("Amount to refund (€)").fill("4.50")
    page.get_by_role("button", name="Request refund").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))

    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Request a refund")
    expect(page.get_by_label("Amount to refund (€)")).to_have_value("4.50")
    # as it stands: nothing typed
    page.get_by_role("button", name="Request refund").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    expect(page.locator("#refund-requested")).to_contain_text("already requested")
    with shop.servers.engine.connect() as conn:
        assert list(conn.scalars(text("SELECT amount_cents FROM refund_requests"))) == [450]
