"""The README's screenshots (scripts/screenshots) show what a customer sees: every page
the script shoots is checked first, so none shows an order's key as its number (earlier
screenshots showed a 22-character key as the "order number")."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.screenshots import SHOTS, assert_no_key_shown, shoot
from tests.browser.shop import show_confirmation


def test_scripts_screenshots_writes_every_shot_and_checks_each_page(browser, shop, tmp_path):
    written = shoot(browser, shop, tmp_path)
    assert [p.name for p in written] == [f"{name}-{device}.png" for name, device, _ in SHOTS]
    assert all(p.stat().st_size > 10_000 for p in written)


def test_the_check_refuses_a_page_that_shows_the_key_as_the_order_number(page: Page, shop):
    """The check can fail: the confirmation page with its key put where the number was."""
    show_confirmation(page, shop)
    assert_no_key_shown(page)
    page.evaluate("""() => document.getElementById("order-number").textContent =
                         location.pathname.split("/").pop()""")
    with pytest.raises(AssertionError, match="key is shown"):
        assert_no_key_shown(page)
