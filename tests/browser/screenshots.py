"""Screenshots of the order pages, for the README: ``scripts/screenshots``.

Starts its own PostgreSQL, Redis and gunicorn (like the tests, on free ports),
walks each page the way a user reaches it in headless Chromium, and writes
small PNGs: every page at desktop width, the form and the confirmation on a
375 px phone, and issue 31's pages (a submit with no shop to answer it, a refusal,
every state of an order's money) at both. Each page is checked before it is shot: no
order's key (the private link's) is shown on it, and the order number shown is a number,
so a screenshot can never again show the key as the "order number"
(tests/browser/test_screenshots.py).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Browser, Page, Route, expect, sync_playwright
from sqlalchemy import text

from dev.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.browser import chromium
from tests.browser.shop import PAGES, PHONE, Shop, fill_form, refuse_as_cross_site, show_form
from tests.conftest import Servers
from tests.money_states import STATES, put_order_in
from webapp.cli import seed
from webapp.db import make_engine, upgrade
from webapp.order_rules import ORDER_NUMBER_ALPHABET, ORDER_NUMBER_LENGTH

DESKTOP = {"viewport": {"width": 900, "height": 700}}
SMALL_PHONE = {**PHONE, "device_scale_factor": 1}
SHOTS = [(name, "desktop", DESKTOP) for name in PAGES] + \
        [(name, "phone", SMALL_PHONE) for name in ("form", "errors", "confirmation")]


def show_outage(page: Page, shop: Shop) -> None:
    """The submit finds no shop (as with gunicorn stopped: the connection is refused)."""
    show_form(page, shop)
    fill_form(page)
    page.route(re.compile(r"/orders$"), lambda route: route.abort("connectionrefused"))
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("#submit-unknown")).to_be_visible()


def show_refused(page: Page, shop: Shop) -> None:
    """The shop refuses the submit as sent from another site (403)."""
    show_form(page, shop)
    fill_form(page)
    page.route(re.compile(r"/orders$"), refuse_as_cross_site)
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("#submit-refused")).to_be_visible()


def order_in(state: str, path: str = "") -> Callable[[Page, Shop], None]:
    """The order page (or its ``path``: /cancel, /refund) of an order in ``state``."""
    def show(page: Page, shop: Shop) -> None:
        key = put_order_in(shop.servers.engine, STATES[state])
        page.goto(f"{shop.url}/orders/{key}{path}")
    return show


def refund_through_the_form(euros: str, *, applied_before_shown: bool = False
                            ) -> Callable[[Page, Shop], None]:
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
                    conn.execute(text(
                        "UPDATE orders SET refunded_cents = reserved_cents, reserved_cents = 0, "
                        "status = CASE WHEN reserved_cents = paid_cents THEN 'refunded' "
                        "ELSE status END WHERE public_id = :key"), {"key": key})
                route.continue_()
            page.route(re.compile(f"/orders/{key}$"), apply)
        page.get_by_role("button", name="Request refund").click()
        expect(page.locator("#refund-requested")).to_be_visible()
    return show


#: Issue 31's pages: a submit with no shop to answer, a refusal, where the money is.
STATE_PAGES: dict[str, Callable[[Page, Shop], None]] = {
    "outage": show_outage, "refused-403": show_refused,
    **{f"order-{state}": order_in(state) for state in (
        "awaiting-payment", "paid", "part-refund-requested", "all-refund-requested",
        "part-refunded", "refunded", "shipped-refund-in-review", "cancelled-paid")},
    "cancel-paid": order_in("paid", "/cancel"),
    "refund-part-refunded": order_in("part-refunded", "/refund"),
    "refund-all-refund-requested": order_in("all-refund-requested", "/refund"),
    "refund-refunded": order_in("refunded", "/refund"),
    "refunded-all-worker-done": refund_through_the_form("36", applied_before_shown=True),
    "refunded-part-worker-pending": refund_through_the_form("10"),
}
MORE_SHOTS = [(name, device, options) for name in STATE_PAGES
              for device, options in (("desktop", DESKTOP), ("phone", SMALL_PHONE))]


#: An order number as the confirmation page shows it.
ORDER_NUMBER = re.compile(f"[{ORDER_NUMBER_ALPHABET}]{{{ORDER_NUMBER_LENGTH}}}")
#: An order's key, as in the confirmation page's address.
ORDER_KEY = re.compile(r"/orders/([A-Za-z0-9_-]{22})(?:[/?#]|$)")


def assert_no_key_shown(page: Page) -> None:
    """The page shows no order's key (it opens the order: never shown as a number), and
    the order number it shows, if any, is one."""
    shown = page.inner_text("body")
    for key in ORDER_KEY.findall(page.url):
        assert key not in shown, f"{page.url}: the order's key is shown on the page"
    numbers = page.locator("#order-number")
    if numbers.count():
        number = numbers.inner_text()
        assert ORDER_NUMBER.fullmatch(number), f"{number!r} is shown as the order number"


def shoot(browser: Browser, shop: Shop, out: Path, shots=SHOTS) -> list[Path]:
    """Walk every page of ``shots`` in ``browser`` against ``shop``, check it, and write its
    PNG into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    walks = {**PAGES, **STATE_PAGES}
    written = []
    for name, device, options in shots:
        context = browser.new_context(**options)
        page = context.new_page()
        walks[name](page, shop)
        assert_no_key_shown(page)
        path = out / f"{name}-{device}.png"
        page.screenshot(path=path, full_page=True, animations="disabled", caret="hide")
        context.close()
        written.append(path)
    return written


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as base:
        postgres = EmbeddedPostgres(Path(base) / "postgres", fast=True, throwaway=True).start()
        redis = EmbeddedRedis(Path(base) / "redis", persist=False).start()
        try:
            postgres.create_database("webapp_test")
            engine = make_engine(postgres.url("webapp_test"))
            upgrade(engine)
            seed(engine)
            with Shop(Servers(postgres, redis, engine)) as shop, sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium.executable(),
                                                     args=chromium.ARGS)
                for path in shoot(browser, shop, out, SHOTS + MORE_SHOTS):
                    print(f"{path} ({path.stat().st_size // 1024} KiB)")
                browser.close()
            engine.dispose()
        finally:
            redis.stop()
            postgres.remove()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
