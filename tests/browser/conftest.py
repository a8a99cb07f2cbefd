"""One headless Chromium per session, a fresh browser context per test, and the
app served by gunicorn on 127.0.0.1 over the session's real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.browser import chromium
from tests.browser.shop import Shop

# Long enough that submits sent up to ~1 s after the first arrive while it is still
# running (between its GETDEL and its INSERT), short enough to keep the suite quick.
PAUSE = "1.5"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if message := chromium.problem():
        # fail, not skip: CI must not go green without it
        pytest.fail(message, pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium.executable(), args=chromium.ARGS
        )
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def shop(servers) -> Iterator[Shop]:
    """The app as deployed: no test pause."""
    with Shop(servers) as live:
        yield live


@pytest.fixture(scope="session")
def slow_shop(servers) -> Iterator[Shop]:
    """The app with a pause between spending a token and writing the order, so
    that repeated submits reach the server while the first is still in flight."""
    with Shop(servers, TEST_PAUSE_AFTER_CONSUME=PAUSE) as live:
        yield live


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[..., Page]]:
    """``new_page(**context_options)``: a page in a context of its own (own cookies)."""
    contexts: list[BrowserContext] = []

    def make(**options: object) -> Page:
        context = browser.new_context(**options)
        context.set_default_timeout(20_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page) -> Page:
    return new_page()
