"""Screenshots of the order pages, for the README: ``scripts/screenshots``.

Starts its own PostgreSQL, Redis and gunicorn (like the tests, on free ports),
walks each page the way a user reaches it in headless Chromium, and writes
small PNGs: every page at desktop width, the form and the confirmation on a
375 px phone, and at both widths the pages that say where an order stands (a submit
with no shop to answer it, a refusal, every state of an order's money, Back + edit's
update, the same order asked about, the 429 page, the card checkout's decline and
unconfirmed charge). Each page is checked before it is shot: no order's key (the private
link's) is shown on it, and the order number shown is a number, so a screenshot can never
again show the key as the "order number" (tests/browser/test_screenshots.py).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

from dev.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.browser import chromium
from tests.browser.screenshot_pages import STATE_PAGES, Walk, card_checkout, example_at_the_cap
from tests.browser.shop import PAGES, PHONE, Shop
from tests.conftest import Servers
from tests.support.payments import Provider
from webapp.cli import seed
from webapp.db import make_engine, upgrade
from webapp.shop.order_rules import ORDER_NUMBER_ALPHABET, ORDER_NUMBER_LENGTH

DESKTOP = {"viewport": {"width": 900, "height": 700}}
SMALL_PHONE = {**PHONE, "device_scale_factor": 1}
BOTH = (("desktop", DESKTOP), ("phone", SMALL_PHONE))
SHOTS = [(name, "desktop", DESKTOP) for name in PAGES] + [
    (name, "phone", SMALL_PHONE) for name in ("form", "errors", "confirmation")
]
#: The pages of tests/browser/screenshot_pages.py, at both widths.
MORE_SHOTS = [(name, device, options) for name in STATE_PAGES for device, options in BOTH]
#: The card checkout's, against a shop that charges cards through the dev provider.
CARD_SHOTS = [
    (name, device, options)
    for name in ("checkout-declined", "checkout-not-confirmed")
    for device, options in BOTH
]

#: The library's htmx example at the session's cap (not the shop's: its own server).
EXAMPLE_SHOTS = [("htmx-note-at-the-cap", device, options) for device, options in BOTH]


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


def shoot(
    browser: Browser, shop: Shop, out: Path, shots=SHOTS, more_walks: dict[str, Walk] | None = None
) -> list[Path]:
    """Walk every page of ``shots`` in ``browser`` against ``shop``, check it, and write its
    PNG into ``out``; the paths written. ``more_walks``: walks besides PAGES and STATE_PAGES."""
    out.mkdir(parents=True, exist_ok=True)
    walks = {**PAGES, **STATE_PAGES, **(more_walks or {})}
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


def main(out: Path, only: set[str] | None = None) -> None:
    """Every shot into ``out``; ``only``: those of these names."""

    def chosen(shots: list) -> list:
        return [shot for shot in shots if only is None or shot[0] in only]

    with tempfile.TemporaryDirectory() as base:
        postgres = EmbeddedPostgres(Path(base) / "postgres", fast=True, throwaway=True).start()
        redis = EmbeddedRedis(Path(base) / "redis", persist=False).start()
        try:
            postgres.create_database("webapp_test")
            engine = make_engine(postgres.url("webapp_test"))
            upgrade(engine)
            seed(engine)
            servers = Servers(postgres, redis, engine)
            with (
                Shop(servers, SAME_ORDER_WINDOW_SECONDS="600") as shop,
                Provider(Path(base) / "provider.jsonl") as provider,
                Shop(servers, **provider.env()) as card_shop,
                example_at_the_cap(servers) as example_walks,
                sync_playwright() as playwright,
            ):
                browser = playwright.chromium.launch(
                    executable_path=chromium.executable(), args=chromium.ARGS
                )
                written = (
                    shoot(browser, shop, out, chosen(SHOTS + MORE_SHOTS))
                    + shoot(browser, card_shop, out, chosen(CARD_SHOTS), card_checkout(provider))
                    + shoot(browser, shop, out, chosen(EXAMPLE_SHOTS), example_walks)
                )
                for path in written:
                    print(f"{path} ({path.stat().st_size // 1024} KiB)")
                browser.close()
            engine.dispose()
        finally:
            redis.stop()
            postgres.remove()


if __name__ == "__main__":
    # scripts/screenshots [DIR [NAME...]]: only the shots NAME... when given.
    main(
        Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"),
        set(sys.argv[2:]) or None,
    )
