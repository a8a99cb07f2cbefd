"""The pages around the order form hold up as it does, in
Chromium at desktop size and on a 375 px phone. Back after cancelling or asking for a
refund lands where the first submit went; a cancelled order says so at the top; a
refunded order's refund page and a second tab are told in words, with a way back to
the order; a refused amount never leaves a POST for Back to meet."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import text

from tests.browser.shop import (
    ORDER_URL,
    PHONE,
    Shop,
    continue_to_review,
    fill_form,
    open_form,
    show_confirmation,
)

DEVICES = {"desktop": {}, "phone": PHONE}


@pytest.fixture(params=list(DEVICES))
def device_page(request, new_page) -> Page:
    """A page at desktop size, then on a 375 px phone."""
    return new_page(**DEVICES[request.param])


def placed_order(page: Page, shop: Shop, *, paid: bool = False) -> str:
    """Place an order through the form; its key. ``paid``: the provider has paid it."""
    show_confirmation(page, shop)
    match = ORDER_URL.search(page.url)
    assert match is not None
    if paid:
        with shop.servers.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE orders SET status = 'paid', "
                    "paid_cents = unit_price_cents * quantity WHERE public_id = :k"
                ),
                {"k": match.group(1)},
            )
        page.reload()
    return match.group(1)


def statuses(shop: Shop) -> list[str]:
    with shop.servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT status FROM orders ORDER BY id")))


def refund_requests(shop: Shop) -> list[int]:
    with shop.servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT amount_cents FROM refund_requests ORDER BY id")))


def expect_notice_at_the_top(page: Page, notice_id: str, says: str) -> None:
    """The notice is shown above the headline, inside the first screenful."""
    notice = page.locator(f"#{notice_id}")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(says)
    box, heading = notice.bounding_box(), page.locator("h1").bounding_box()
    viewport = page.viewport_size
    assert box and heading and viewport
    assert box["y"] < heading["y"], "the notice is below the headline"
    assert box["y"] + box["height"] <= viewport["height"], "the notice is below the fold"


def test_back_after_cancelling_shows_the_form_and_its_submit_lands_on_the_order(device_page, shop):
    """Was: Back fetched the cancel page again, 409 "This order was not cancelled"."""
    page = device_page
    key = placed_order(page, shop)
    page.get_by_role("link", name="Cancel order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cancel this order?")
    page.get_by_role("button", name="Yes, cancel my order").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Your order is cancelled")
    expect_notice_at_the_top(page, "cancelled", "We cancelled your order")
    expect(page.get_by_text("Nothing was charged.")).to_be_visible()

    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cancel this order?")
    page.get_by_role("button", name="Yes, cancel my order").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Your order is cancelled")
    expect_notice_at_the_top(page, "already-cancelled", "already cancelled — nothing changed")
    assert statuses(shop) == ["cancelled"]


def test_a_paid_then_cancelled_order_says_how_to_get_the_money_back(device_page, shop):
    """Was: "Thank you — your order is placed" and "Nothing will be shipped or charged"."""
    page = device_page
    placed_order(page, shop, paid=True)
    page.get_by_role("link", name="Cancel order").click()
    page.get_by_role("button", name="Yes, cancel my order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Your order is cancelled")
    expect(page.locator("#order-state")).to_have_text("Nothing will be shipped.")
    expect(page.locator("#money-state")).to_have_text("You paid €36.00.")
    expect(page.locator("#money-next")).to_have_text(
        "Press “Request a refund” below to get it back."
    )
    expect(page.get_by_text("or charged")).to_have_count(0)
    page.get_by_role("link", name="Request a refund").click()
    page.get_by_label("Amount to refund (€)").fill("36")
    page.get_by_role("button", name="Request refund").click()
    expect(page.locator("#money-state")).to_have_text(
        "You paid €36.00. All of it is being refunded to you."
    )


def test_back_after_a_refund_request_lands_on_the_request_not_a_second_one(device_page, shop):
    """Was: the refund page was no-store, so Back drew a fresh token and the amount
    typed again made a second refund."""
    page = device_page
    key = placed_order(page, shop, paid=True)
    page.get_by_role("link", name="Request a refund").click()
    page.get_by_label("Amount to refund (€)").fill("1.00")
    page.get_by_role("button", name="Request refund").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    expect_notice_at_the_top(page, "refund-requested", "refund request was received")

    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Request a refund")
    amount = page.get_by_label("Amount to refund (€)")
    # the browser may or may not type the old input back
    if not amount.input_value():
        amount.fill("1.00")
    page.get_by_role("button", name="Request refund").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    expect_notice_at_the_top(page, "refund-requested", "already requested")
    assert refund_requests(shop) == [100]


def test_a_second_tab_and_the_refund_page_of_a_refunded_order_say_what_happened(device_page, shop):
    """Was: a bare 409 "Something went wrong" whose only link went to the order form."""
    page = device_page
    key = placed_order(page, shop, paid=True)
    second_tab = page.context.new_page()
    second_tab.goto(f"{shop.url}/orders/{key}/refund")
    page.get_by_role("link", name="Request a refund").click()
    page.get_by_label("Amount to refund (€)").fill("36")
    page.get_by_role("button", name="Request refund").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))

    second_tab.get_by_label("Amount to refund (€)").fill("36")
    second_tab.get_by_role("button", name="Request refund").click()
    expect(second_tab.locator("#amount-error")).to_have_text(
        "Nothing is left to refund: the rest is already requested and waiting to be applied."
    )

    # the worker applies the first request
    with shop.servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'refunded', refunded_cents = paid_cents, "
                "reserved_cents = 0"
            )
        )
        conn.execute(text("UPDATE refund_requests SET status = 'applied'"))
    second_tab.get_by_label("Amount to refund (€)").fill("1")
    second_tab.get_by_role("button", name="Request refund").click()
    expect(second_tab.get_by_role("heading", level=1)).to_have_text(
        "This order is refunded in full"
    )
    # a page of its own, not nested
    expect(second_tab.locator("h1")).to_have_count(1)
    expect(second_tab.get_by_text("Something went wrong")).to_have_count(0)
    second_tab.get_by_role("link", name="Back to your order").click()
    expect(second_tab).to_have_url(re.compile(f"/orders/{key}$"))
    expect(second_tab.get_by_role("heading", level=1)).to_have_text("Your order is refunded")
    assert refund_requests(shop) == [3600]


@pytest.mark.parametrize("form", ["order", "refund"])
def test_back_after_a_validation_error_never_shows_the_resubmission_page(device_page, shop, form):
    """With JavaScript, htmx swaps the errors in place: there is no POST result in
    history for Back to ask about ("Confirm Form Resubmission", ERR_CACHE_MISS)."""
    page = device_page
    if form == "order":
        open_form(page, shop)
        fill_form(page, email="not an address")
        page.get_by_role("button", name="Continue").click()
        expect(page.locator("#error-summary")).to_be_focused()
        fill_form(page)
        continue_to_review(page)
        page.get_by_role("button", name="Place order").click()
        # Back from the order: the review, from the browser's cache
        heading = "Check your order"
    else:
        key = placed_order(page, shop, paid=True)
        page.get_by_role("link", name="Request a refund").click()
        page.get_by_label("Amount to refund (€)").fill("99")
        page.get_by_role("button", name="Request refund").click()
        expect(page.locator("#amount-error")).to_have_text("You can refund at most €36.00.")
        page.get_by_label("Amount to refund (€)").fill("2")
        page.get_by_role("button", name="Request refund").click()
        expect(page).to_have_url(re.compile(f"/orders/{key}$"))
        heading = "Request a refund"
    expect(page).to_have_url(ORDER_URL)
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    assert not page.url.startswith("chrome-error:")


def test_back_to_a_refused_cancel_never_shows_the_resubmission_page(device_page, shop):
    """Shipped while the cancel page was open: the refusal is reached by a GET, so
    going Back to it later shows it again instead of asking to send the form."""
    page = device_page
    key = placed_order(page, shop, paid=True)
    page.get_by_role("link", name="Cancel order").click()
    with shop.servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = 'shipped'"))
    page.get_by_role("button", name="Yes, cancel my order").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("This order was not cancelled")
    expect(page.locator("#cancel-refused")).to_have_text(
        "An order that is shipped cannot be cancelled."
    )
    page.get_by_role("link", name="Back to your order").click()
    expect(page).to_have_url(re.compile(f"/orders/{key}$"))
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("This order was not cancelled")
    assert not page.url.startswith("chrome-error:")
    assert statuses(shop) == ["shipped"]


def test_a_mistyped_order_link_says_there_is_no_order_at_this_link(device_page, shop):
    page = device_page
    key = placed_order(page, shop)
    for typo in (key[:-1] + ("A" if key[-1] != "A" else "B"), key[:-3]):
        page.goto(f"{shop.url}/orders/{typo}")
        expect(page.get_by_role("heading", level=1)).to_contain_text("no order at this link")
        expect(page.get_by_text("with this number")).to_have_count(0)


@pytest.mark.parametrize(("width", "whole"), [(320, "price"), (375, "label")])
def test_the_product_list_shows_whole_prices_on_a_small_phone(new_page, shop, width, whole):
    """Was: "€12" for €12.50 at 375 px, the list cutting the end of its text. The price
    comes first, and fits at 320 px; at 375 px the whole label fits."""
    page = new_page(**{**PHONE, "viewport": {"width": width, "height": 640}})
    open_form(page, shop)
    select = page.get_by_label("Product")
    labels = select.evaluate("s => Array.from(s.options, o => o.text)")
    assert labels and all(re.match(r"€\d+\.\d\d · \S", label) for label in labels)
    for label in labels:
        select.select_option(label=label)
        shown = label if whole == "label" else label.split(" · ")[0]
        room, needed = select.evaluate(
            """(s, text) => {
            const style = getComputedStyle(s);
            const probe = document.createElement("span");
            probe.style.font = style.font;
            probe.style.whiteSpace = "pre";
            probe.style.position = "absolute";
            probe.textContent = text;
            document.body.append(probe);
            const needed = probe.getBoundingClientRect().width;
            probe.remove();
            return [s.clientWidth - parseFloat(style.paddingLeft)
                    - parseFloat(style.paddingRight), needed];
        }""",
            shown,
        )
        assert needed <= room, f"{shown!r} needs {needed:.0f}px, the list shows {room:.0f}px"
    scrolled = page.evaluate("() => document.documentElement.scrollWidth")
    assert scrolled <= width, f"the page is {scrolled}px wide on a {width} px phone"
