"""What every user gets from the pages, whatever they do with the button:
no serious accessibility faults (axe-core), a busy button that stays put and
is announced, and a layout that works on a 375 px wide phone."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import text

from tests.browser.shop import (
    PAGES,
    PHONE,
    Shop,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
    show_confirmation,
)

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical findings on the page, one line each."""
    if not AXE.exists():
        pytest.fail(
            f"axe-core is missing at {AXE}: run `npm ci` (scripts/test does).", pytrace=False
        )
    # Evaluated over the DevTools protocol, so the page's CSP (script-src 'self')
    # stays as strict as users get it.
    page.evaluate(AXE.read_text())
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    assert len(result["passes"]) > 10, "axe-core did not check the page"
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[node['target'] for node in v['nodes']]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("state", PAGES)
@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_pages_have_no_serious_accessibility_violations(new_page, shop, state, device):
    page = new_page(**(PHONE if device == "phone" else {}))
    PAGES[state](page, shop)
    assert serious_violations(page) == []


def pay_and_reload(page: Page, shop: Shop) -> None:
    with shop.servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET status = 'paid', paid_cents = unit_price_cents * quantity")
        )
    page.reload()


def show_cancel(page: Page, shop: Shop) -> None:
    show_confirmation(page, shop)
    page.get_by_role("link", name="Cancel order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cancel this order?")


def show_cancelled(page: Page, shop: Shop) -> None:
    show_cancel(page, shop)
    page.get_by_role("button", name="Yes, cancel my order").click()
    expect(page.locator("#cancelled")).to_be_visible()


def show_refund(page: Page, shop: Shop) -> None:
    show_confirmation(page, shop)
    pay_and_reload(page, shop)
    page.get_by_role("link", name="Request a refund").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Request a refund")


def show_refund_refused(page: Page, shop: Shop) -> None:
    show_refund(page, shop)
    page.get_by_label("Amount to refund (€)").fill("999")
    page.get_by_role("button", name="Request refund").click()
    expect(page.locator("#amount-error")).to_be_visible()


def show_fully_refunded(page: Page, shop: Shop) -> None:
    show_refund(page, shop)
    with shop.servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = 'refunded', refunded_cents = paid_cents"))
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text("This order is refunded in full")


def show_not_found(page: Page, shop: Shop) -> None:
    page.goto(f"{shop.url}/no-such-page")
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")


def show_no_such_order(page: Page, shop: Shop) -> None:
    page.goto(f"{shop.url}/orders/cut-short")
    expect(page.get_by_role("heading", level=1)).to_have_text("There is no order at this link")


#: The pages around the order form: cancel, refund and the error pages.
OTHER_PAGES = {
    "cancel": show_cancel,
    "cancelled": show_cancelled,
    "refund": show_refund,
    "refund-refused": show_refund_refused,
    "fully-refunded": show_fully_refunded,
    "not-found": show_not_found,
    "no-such-order": show_no_such_order,
}


@pytest.mark.parametrize("state", OTHER_PAGES)
@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_cancel_refund_and_error_pages_have_no_serious_accessibility_violations(
    new_page, shop, state, device
):
    page = new_page(**(PHONE if device == "phone" else {}))
    OTHER_PAGES[state](page, shop)
    assert serious_violations(page) == []
    if device == "phone":
        assert_fits_the_screen(page)


def test_busy_button_is_aria_disabled_swallows_a_second_click_and_does_not_move(page, slow_shop):
    open_form(page, slow_shop)
    fill_form(page)
    continue_to_review(page)
    button = page.get_by_role("button", name="Place order")
    button.scroll_into_view_if_needed()
    expect(button).to_have_accessible_name("Place order")
    before = button.bounding_box()
    assert before is not None
    # Record every submit event after submit-once.js has handled it, in storage
    # that outlives the page (locators would wait for the navigation instead).
    page.evaluate("""() => document.addEventListener("submit", (event) => {
        const b = event.target.querySelector("button[type=submit]");
        const r = b.getBoundingClientRect();
        const seen = JSON.parse(sessionStorage.getItem("seen") || "[]");
        seen.push({swallowed: event.defaultPrevented, disabled: b.disabled,
                   ariaDisabled: b.getAttribute("aria-disabled"), label: b.textContent.trim(),
                   x: r.x, y: r.y, width: r.width, height: r.height});
        sessionStorage.setItem("seen", JSON.stringify(seen));
    })""")
    mark = slow_shop.posts_received()
    x, y = before["x"] + before["width"] / 2, before["y"] + before["height"] / 2
    page.mouse.click(x, y)
    page.wait_for_timeout(20)
    # the server is still placing the order: swallowed
    page.mouse.click(x, y)
    number = expect_confirmation(page, already_placed=False)
    first, second = page.evaluate("() => JSON.parse(sessionStorage.getItem('seen'))")
    # htmx sends the first itself (so the browser's own submit is prevented too); the
    # second is swallowed either way, and one POST reaches the server.
    assert second["swallowed"]
    for busy in (first, second):
        assert busy["ariaDisabled"] == "true" and busy["disabled"] is False
        assert busy["label"] == "Placing your order…"
        for side in ("x", "y", "width", "height"):
            assert abs(busy[side] - before[side]) < 0.5, f"the busy button moved: {side}"
    assert slow_shop.posts_since(mark, at_least=1) == 1
    assert slow_shop.orders() == [number]


def test_form_and_confirmation_fit_a_375px_phone(new_page, shop):
    page = new_page(**PHONE)
    open_form(page, shop)
    assert_fits_the_screen(page)
    field_sizes = page.eval_on_selector_all(
        "input:not([type=hidden]), select, textarea",
        "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))",
    )
    assert min(field_sizes) >= 16, "smaller text makes phones zoom in on focus"
    button = page.get_by_role("button", name="Continue")
    box, form = button.bounding_box(), page.locator("form").bounding_box()
    assert box and form and box["height"] >= 44 and box["width"] >= form["width"] - 1
    fill_form(page)
    button.tap()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")
    assert_fits_the_screen(page)
    button = page.get_by_role("button", name="Place order")
    box, form = button.bounding_box(), page.locator("form[data-submit-once]").bounding_box()
    assert box and form and box["height"] >= 44 and box["width"] >= form["width"] - 1
    button.tap()
    expect_confirmation(page, already_placed=False)
    assert_fits_the_screen(page)


def assert_fits_the_screen(page: Page) -> None:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375, f"the page is {width}px wide: it scrolls sideways on a phone"


def test_the_429_page_does_not_refresh_itself_and_names_the_one_wait(new_page, servers):
    """Was: axe critical (meta-refresh: the page reloaded itself) and three
    waits on one page ("a minute", "tries again in 11 seconds", Retry-After: 6)."""
    with Shop(servers, workers=1, SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE="1") as limited:
        for device in ("desktop", "phone"):
            page = new_page(**(PHONE if device == "phone" else {}))
            # the second view in a minute, even across its boundary
            for _ in range(3):
                refused = page.goto(f"{limited.url}/orders/new")
                assert refused is not None
                if refused.status == 429:
                    break
            assert refused.status == 429
            wait = int(refused.headers["retry-after"])
            assert serious_violations(page) == []
            assert page.locator("meta[http-equiv]").count() == 0
            expect(page.locator("#try-again")).to_contain_text(f"Please try again in {wait} second")
            expect(page.get_by_text("minute")).to_have_count(0)
            expect(page.get_by_role("link", name="Try again")).to_have_attribute(
                "href", "/orders/new"
            )
            if device == "phone":
                assert_fits_the_screen(page)
