"""The pages that say where an order stands, each reached the way a shopper reaches it
(tests/browser/screenshots.py shoots them): a submit with no shop to answer it, a
refusal, every state of an order's money, Back + edit's update, the same order asked
about, the 429 page, and the card checkout's answers."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
from tests.browser.test_examples_in_browser import ExampleServer
from tests.conftest import Servers
from tests.refunds.test_refund_photo import PNG
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


def show_review_then_back(page: Page, shop: Shop) -> None:
    """The checkout's review, then Back: the details as they were typed, to edit or
    Continue again (the same token: no second order)."""
    open_form(page, shop)
    fill_form(page, quantity="3")
    continue_to_review(page)
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")
    expect(page.get_by_label("Quantity")).to_have_value("3")


def show_photo_kept(page: Page, shop: Shop) -> None:
    """A refund asked with a photo and an amount that is not one: the form again (422),
    the photo kept and named, so the customer corrects the amount alone."""
    key = put_order_in(shop.servers.engine, STATES["paid"])
    page.goto(f"{shop.url}/orders/{key}/refund")
    page.get_by_label("Amount to refund (€)").fill("twelve")
    page.get_by_label("A photo of the item (optional)").set_input_files(
        {"name": "box.png", "mimeType": "image/png", "buffer": PNG}
    )
    page.get_by_role("button", name="Request refund").click()
    expect(page.get_by_text("Kept: box.png. Pick another to replace it.")).to_be_visible()


#: The update form of the page, as the browser would send it with Update pressed.
UPDATE_FORM = """() => {
  const button = document.getElementById("update-order");
  return [button.formAction, Array.from(new FormData(button.form, button))];
}"""
#: Send an update form captured with UPDATE_FORM, as its own tab sends it.
SEND_UPDATE = """async ([action, fields]) => (await fetch(action, {
  method: "POST", body: new URLSearchParams(fields), redirect: "manual"})).type"""


def show_update_stale(page: Page, shop: Shop) -> None:
    """Two used forms of one unpaid order, each edited and offering "Update order N",
    both drawn at its version 1: one tab's update lands (sent as that tab sends it), and
    Update pressed on the other is told the order changed since it was opened, with the
    order as it is now and this tab's details kept."""
    show_amendment(page, shop)
    other_tab = page.evaluate(UPDATE_FORM)
    # The answer was swapped into the review: one Back to the details.
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")
    page.get_by_label("Quantity").fill("9")
    page.get_by_label("Shipping address").fill("7 Second Row\nYork YO1 7HH")
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    expect(page.get_by_role("button", name=re.compile(r"^Update order "))).to_be_visible()
    page.evaluate(SEND_UPDATE, other_tab)
    page.get_by_role("button", name=re.compile(r"^Update order ")).click()
    expect(page.get_by_text("was changed since you opened this page")).to_be_visible()


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
    # the checkout's Back, a photo kept on a 422, a stale edit told
    "review-back": show_review_then_back,
    "refund-photo-kept-422": show_photo_kept,
    "update-stale": show_update_stale,
}


@contextmanager
def example_at_the_cap(servers: Servers) -> Iterator[dict[str, Walk]]:
    """The library's htmx example (flask-submit-once/examples/htmx_signup) served with a
    session allowance of one page's forms (its two): a question, answered in place, is
    saved and shown, and where its next form would be, the page says when to reload."""
    server = ExampleServer(servers, "htmx_signup")
    server.args[-1] = 'htmx_signup.app:create_app({"SUBMIT_ONCE_MAX_FORMS_PER_SESSION": 2})'

    def asked_at_the_cap(page: Page, shop: Shop) -> None:
        page.goto(server.url)
        page.get_by_label("Your question").fill("Is there parking near the hall?")
        page.get_by_role("button", name="Ask").click()
        expect(page.get_by_text("We got your question")).to_be_visible()
        expect(page.get_by_text("reload the page in")).to_be_visible()

    with server:
        yield {"htmx-note-at-the-cap": asked_at_the_cap}
