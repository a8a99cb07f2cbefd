"""The shop as a browser user meets it: the live server, what a user does on
its pages, and what the database holds afterwards."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qsl, urlencode

from playwright.sync_api import Page, Route, expect
from sqlalchemy import text

from tests.conftest import Servers
from tests.support.live import LiveServer

# notices never ride in the URL
ORDER_URL = re.compile(r"/orders/([A-Za-z0-9_-]{22})$")

#: A phone-sized browser context (pass to browser.new_context).
PHONE = {
    "viewport": {"width": 375, "height": 740},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}

CUSTOMER = {
    "quantity": "2",
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "address": "12 St James's Square\nLondon SW1Y 4JH",
}


class Shop(LiveServer):
    """gunicorn serving the app, logging every request as it arrives.

    ``--log-level debug`` makes gunicorn log "POST /orders" when a request is
    read, before the app runs: a request the browser gave up on is counted too.
    """

    def __init__(self, servers: Servers, *, workers: int = 2, **env: str) -> None:
        super().__init__(servers, workers=workers, threads=8, **env)
        self.args[-1:-1] = ["--log-level", "debug"]
        self.servers = servers

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def posts_received(self) -> int:
        """POST /orders requests the server has read so far."""
        return len(re.findall(r"\[DEBUG\] POST /orders$", self.output(), re.MULTILINE))

    def posts_since(self, mark: int, *, at_least: int, timeout: float = 10) -> int:
        """POSTs read since ``mark``, once there are ``at_least`` of them (or the
        timeout passed): requests on other connections may still be in transit."""
        deadline = time.monotonic() + timeout
        while (count := self.posts_received() - mark) < at_least and time.monotonic() < deadline:
            time.sleep(0.05)
        return count

    def pauses(self, where: str) -> int:
        """How many submits the test hook has paused after ``where`` ("consume", "commit")."""
        return self.output().count(f"test hook: paused after {where}")

    def wait_for_pause(self, where: str, seen: int, timeout: float = 20) -> None:
        """Wait until a submit more than the ``seen`` ones is paused after ``where``."""
        deadline = time.monotonic() + timeout
        while self.pauses(where) == seen:
            assert time.monotonic() < deadline, f"no submit reached the pause after {where}"
            time.sleep(0.05)

    def wait_for_orders(self, count: int, timeout: float = 20) -> list[str]:
        """The orders, once there are ``count`` of them (or the timeout passed)."""
        deadline = time.monotonic() + timeout
        while len(orders := self.orders()) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return orders

    def orders(self) -> list[str]:
        """Public ids of the orders in the database, oldest first."""
        with self.servers.engine.connect() as conn:
            return list(conn.scalars(text("SELECT public_id FROM orders ORDER BY id")))


def open_form(page: Page, shop: Shop) -> None:
    page.goto(f"{shop.url}/orders/new")
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")


def fill_form(page: Page, **fields: str) -> None:
    """Fill in the order form like a person would; ``fields`` override CUSTOMER."""
    values = {**CUSTOMER, **fields}
    page.get_by_label("Product").select_option(index=0)
    page.get_by_label("Quantity").fill(values["quantity"])
    page.get_by_label("Full name").fill(values["name"])
    page.get_by_label("Email").fill(values["email"])
    page.get_by_label("Shipping address").fill(values["address"])


def continue_to_review(page: Page) -> None:
    """Press Continue on the filled-in details: the review of what will be charged, whose
    Place order places the order."""
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")
    # The heading shows before the page's scripts ran: a click before htmx has taken the
    # form over would post it without JavaScript (a navigation the test did not ask for).
    page.wait_for_load_state("load")


def submit_spaced(page: Page, times: int, spacing_ms: int) -> None:
    """Send the form ``times`` times, ``spacing_ms`` apart, from a page script.

    ``HTMLFormElement.prototype.submit`` fires no submit event, so submit-once.js
    cannot swallow the repeats: every call starts a real POST, as a browser
    without that script (or a user faster than it) would.
    """
    page.evaluate(
        """([times, spacing]) => {
            const form = document.querySelector("form[data-submit-once]");
            for (let i = 0; i < times; i++) {
                setTimeout(() => HTMLFormElement.prototype.submit.call(form), i * spacing);
            }
        }""",
        [times, spacing_ms],
    )


def expect_confirmation(page: Page, *, already_placed: bool | None) -> str:
    """Wait for an order's confirmation page; its key (the private link's). ``already_placed``:
    whether the "already placed" notice must be shown (True), absent (False), or
    either (None: which of racing duplicates the server took first is not fixed)."""
    expect(page).to_have_url(ORDER_URL, timeout=30_000)
    expect(page.get_by_role("heading", level=1)).to_have_text("Thank you — your order is placed")
    match = ORDER_URL.search(page.url)
    assert match is not None
    shown = page.locator("#order-number")
    number = shown.inner_text()
    assert number == shown.get_attribute("data-order-number")
    assert number != match.group(1), "the order number shown is not the key in the address"
    notice = page.get_by_text("This order was already placed")
    if already_placed:
        expect(notice).to_be_visible()
    elif already_placed is False:
        expect(notice).to_have_count(0)
    return match.group(1)


def refuse_as_cross_site(route: Route) -> None:
    """The shop's real answer to a form it judges sent from another site: a foreign
    Origin and a CSRF check that fails, as behind a proxy whose Host drops the port."""
    form = dict(parse_qsl(route.request.post_data or ""))
    form["csrf_token"] = "x" + form["csrf_token"][1:]
    route.fulfill(
        response=route.fetch(
            post_data=urlencode(form),
            headers={**route.request.headers, "origin": "https://127.0.0.1"},
        )
    )


# The pages a user can be looking at, each reached the way a user reaches it.
def show_form(page: Page, shop: Shop) -> None:
    open_form(page, shop)


def show_errors(page: Page, shop: Shop) -> None:
    open_form(page, shop)
    fill_form(page, name="", email="not an address", quantity="0")
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#error-summary")).to_be_focused()


def show_review(page: Page, shop: Shop) -> None:
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)


def show_confirmation(page: Page, shop: Shop) -> None:
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.get_by_role("button", name="Place order").click()
    expect_confirmation(page, already_placed=False)


def show_already_placed(page: Page, shop: Shop) -> None:
    show_confirmation(page, shop)
    page.go_back()
    page.get_by_role("button", name="Place order").click()
    expect_confirmation(page, already_placed=True)


PAGES = {
    "form": show_form,
    "errors": show_errors,
    "review": show_review,
    "confirmation": show_confirmation,
    "already-placed": show_already_placed,
}
