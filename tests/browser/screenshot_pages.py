"""The pages that say where an order stands, each reached the way a shopper reaches it
(tests/browser/screenshots.py shoots them): a submit with no shop to answer it, a
refusal, every state of an order's money, Back + edit's update, the same order asked
about, the 429 page, and the card checkout's answers."""

from __future__ import annotations

import re
from collections.abc import Callable

from playwright.sync_api import Page, Route, expect
from sqlalchemy import text

from tests.browser.shop import (
    Shop,
    continue_to_review,
    fill_form,
    open_form,
    refuse_as_cross_site,
    show_confirmation,
    show_form,
)
from tests.support.money_states import STATES, put_order_in
from tests.support.payments import DECLINED, PAYS, Provider

#: How a page is reached: walked in a fresh page against the shop.
Walk = Callable[[Page, Shop], None]


def show_outage(page: Page, shop: Shop) -> None:
    """The submit finds no shop (as with gunicorn stopped: the connection is refused)."""
    show_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.route(re.compile(r"/orders$"), lambda route: route.abort("connectionrefused"))
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("#submit-unknown")).to_be_visible()


def show_refused(page: Page, shop: Shop) -> None:
    """The shop refuses the submit as sent from another site (403)."""
    show_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.route(re.compile(r"/orders$"), refuse_as_cross_site)
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("#submit-refused")).to_be_visible()


def order_in(state: str, path: str = "") -> Walk:
    """The order page (or its ``path``: /cancel, /refund) of an order in ``state``."""

    def show(page: Page, shop: Shop) -> None:
        key = put_order_in(shop.servers.engine, STATES[state])
        page.goto(f"{shop.url}/orders/{key}{path}")

    return show


def refund_through_the_form(euros: str, *, applied_before_shown: bool = False) -> Walk:
    """A paid order's refund asked for on its refund page; the order page it lands on, the
    worker having applied the refund before that page was shown or not."""

    def show(page: Page, shop: Shop) -> None:
        key = put_order_in(shop.servers.engine, STATES["paid"])
        page.goto(f"{shop.url}/orders/{key}/refund")
        page.get_by_label("Amount to refund (€)").fill(euros)
        if applied_before_shown:

            def apply(route: Route) -> None:
                with shop.servers.engine.begin() as conn:
                    conn.execute(text("UPDATE refund_requests SET status = 'applied'"))
                    conn.execute(
                        text(
                            "UPDATE orders SET refunded_cents = reserved_cents,"
                            " reserved_cents = 0, "
                            "status = CASE WHEN reserved_cents = paid_cents THEN 'refunded' "
                            "ELSE status END WHERE public_id = :key"
                        ),
                        {"key": key},
                    )
                route.continue_()

            page.route(re.compile(f"/orders/{key}$"), apply)
        page.get_by_role("button", name="Request refund").click()
        expect(page.locator("#refund-requested")).to_be_visible()

    return show


def show_amendment(page: Page, shop: Shop) -> None:
    """Back to a placed order's form, the quantity changed, sent again: the update offered."""
    show_confirmation(page, shop)
    number = page.locator("#order-number").inner_text()
    page.go_back()
    page.go_back()
    page.get_by_label("Quantity").fill("5")
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    expect(
        page.get_by_role("button", name=f"Update order {number} with these details")
    ).to_be_visible()


def show_amended(page: Page, shop: Shop) -> None:
    """The update pressed: the order page, updated."""
    show_amendment(page, shop)
    page.get_by_role("button", name=re.compile(r"^Update order ")).click()
    expect(page.locator("#amended")).to_have_text("We updated your order with your new details.")


def show_same_order(page: Page, shop: Shop) -> None:
    """Two tabs of the form with the same details: the second is asked about (the shop's
    SAME_ORDER_WINDOW_SECONDS is on, as in production)."""
    open_form(page, shop)
    first_tab = page.context.new_page()
    show_confirmation(first_tab, shop)
    first_tab.close()
    fill_form(page)
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    expect(page.get_by_text("You placed this same order")).to_be_visible()


def show_too_many_forms(page: Page, shop: Shop) -> None:
    """The 429 page, from a shop of its own that lets a client open one form a minute."""
    with Shop(shop.servers, workers=1, SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE="1") as limited:
        # its start opened the form once; a minute may turn between
        for _ in range(3):
            answer = page.goto(f"{limited.url}/orders/new")
            if answer is not None and answer.status == 429:
                break
        assert answer is not None and answer.status == 429, answer
        expect(page.locator("#try-again")).to_be_visible()


def card_checkout(provider: Provider) -> dict[str, Walk]:
    """The form's answers when a card is charged through ``provider`` (dev/provider.py):
    the bank declines it; the provider fails before charging (the order stays charging)."""

    def declined(page: Page, shop: Shop) -> None:
        open_form(page, shop)
        fill_form(page)
        continue_to_review(page)
        page.get_by_label("Card number").fill(DECLINED)
        page.get_by_role("button", name="Place order").click()
        expect(page.locator("#form-message")).to_contain_text("Your card was declined")

    def not_confirmed(page: Page, shop: Shop) -> None:
        open_form(page, shop)
        fill_form(page)
        continue_to_review(page)
        page.get_by_label("Card number").fill(PAYS)
        # every try: the client retries a 5xx
        provider.faults(fail_before_charge=-1)
        try:
            page.get_by_role("button", name="Place order").click()
            expect(page.locator("#form-message")).to_contain_text(
                "we could not confirm your card payment"
            )
        finally:
            provider.faults()

    return {"checkout-declined": declined, "checkout-not-confirmed": not_confirmed}


#: Those pages, by the name of their PNG (the card checkout's: card_checkout).
STATE_PAGES: dict[str, Walk] = {
    "outage": show_outage,
    "refused-403": show_refused,
    **{
        f"order-{state}": order_in(state)
        for state in (
            "awaiting-payment",
            "paid",
            "part-refund-requested",
            "all-refund-requested",
            "part-refunded",
            "refunded",
            "shipped-refund-in-review",
            "cancelled-paid",
            "charging",
            "declined",
        )
    },
    "cancel-paid": order_in("paid", "/cancel"),
    "refund-part-refunded": order_in("part-refunded", "/refund"),
    "refund-all-refund-requested": order_in("all-refund-requested", "/refund"),
    "refund-refunded": order_in("refunded", "/refund"),
    "refunded-all-worker-done": refund_through_the_form("36", applied_before_shown=True),
    "refunded-part-worker-pending": refund_through_the_form("10"),
    "amendment-offered": show_amendment,
    "amended": show_amended,
    "same-order-asked": show_same_order,
    "too-many-forms-429": show_too_many_forms,
}
