"""Screenshots of the order pages, for the README: ``scripts/screenshots``.

Starts its own PostgreSQL, Redis and gunicorn (like the tests, on free ports),
walks each page the way a user reaches it in headless Chromium, and writes
small PNGs: every page at desktop width, the form and the confirmation on a
375 px phone.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from dev.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.browser import chromium
from tests.browser.shop import PAGES, PHONE, Shop
from tests.conftest import Servers
from webapp.cli import seed
from webapp.db import make_engine, upgrade

DESKTOP = {"viewport": {"width": 900, "height": 700}}
SHOTS = [(name, "desktop", DESKTOP) for name in PAGES] + \
        [(name, "phone", {**PHONE, "device_scale_factor": 1})
         for name in ("form", "errors", "confirmation")]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
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
                for name, device, options in SHOTS:
                    context = browser.new_context(**options)
                    page = context.new_page()
                    PAGES[name](page, shop)
                    path = out / f"{name}-{device}.png"
                    page.screenshot(path=path, full_page=True, animations="disabled",
                                    caret="hide")
                    context.close()
                    print(f"{path} ({path.stat().st_size // 1024} KiB)")
                browser.close()
            engine.dispose()
        finally:
            redis.stop()
            postgres.remove()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
