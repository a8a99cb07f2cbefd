"""Screenshots of the order pages, for the README: ``scripts/screenshots``.

Starts its own PostgreSQL, Redis and gunicorn (like the tests, on free ports),
walks each page the way a user reaches it in headless Chromium, and writes
small PNGs: every page at desktop width, the form and the confirmation on a
375 px phone. Each page is checked before it is shot: no order's key (the private
link's) is shown on it, and the order number shown is a number, so a screenshot can
never again show the key as the "order number" (tests/browser/test_screenshots.py).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

from dev.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.browser import chromium
from tests.browser.shop import PAGES, PHONE, Shop
from tests.conftest import Servers
from webapp.cli import seed
from webapp.db import make_engine, upgrade
from webapp.order_rules import ORDER_NUMBER_ALPHABET, ORDER_NUMBER_LENGTH

DESKTOP = {"viewport": {"width": 900, "height": 700}}
SHOTS = [(name, "desktop", DESKTOP) for name in PAGES] + \
        [(name, "phone", {**PHONE, "device_scale_factor": 1})
         for name in ("form", "errors", "confirmation")]


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


def shoot(browser: Browser, shop: Shop, out: Path) -> list[Path]:
    """Walk every page of SHOTS in ``browser`` against ``shop``, check it, and write its
    PNG into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, device, options in SHOTS:
        context = browser.new_context(**options)
        page = context.new_page()
        PAGES[name](page, shop)
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
                for path in shoot(browser, shop, out):
                    print(f"{path} ({path.stat().st_size // 1024} KiB)")
                browser.close()
            engine.dispose()
        finally:
            redis.stop()
            postgres.remove()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
