"""A submit the shop cannot answer, as a shopper meets it in production: Chromium on HTTPS
through the shipped nginx (docs/nginx.conf, tests/support/nginx.py), gunicorn stopped
between opening the form and pressing Place order. nginx answers the submit itself (its
502, the shop's own page); the form says the order may or may not be placed and keeps what
was typed; once gunicorn is back on its port the check says nothing was placed, and the
form places one order.

The 502s of test_submit_outcomes_in_browser.py are fulfilled in the browser; these are
nginx's own."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.shop import CUSTOMER, Shop, continue_to_review, expect_confirmation, fill_form
from tests.support.nginx import Nginx, needs_nginx, nginx

pytestmark = needs_nginx

UNKNOWN = "We could not reach the shop, so your order may or may not be placed."
NOT_PLACED = "Your order was not placed."
SUBMIT = re.compile(r"/orders$")


@pytest.fixture(scope="module")
def shop_behind_nginx(servers, tmp_path_factory) -> Iterator[tuple[Shop, Nginx]]:
    """gunicorn (one worker, so it restarts quickly) behind nginx, trusting nginx's
    X-Forwarded-* and answering the address Chromium names as Host."""
    with (
        Shop(servers, workers=1, TRUSTED_PROXIES="1", TRUSTED_HOSTS="127.0.0.1") as live,
        nginx(tmp_path_factory.mktemp("nginx"), live.port) as site,
    ):
        yield live, site


def button(page: Page):
    return page.locator("form[data-submit-once] button[type=submit]")


def test_behind_nginx_with_gunicorn_stopped_the_form_says_so_and_after_the_restart_places_once(
    new_page, shop_behind_nginx
):
    """Was: "Placing your order…" for 20 s and more, the button disabled, or nginx's raw
    "502 Bad Gateway / nginx/1.22.1"."""
    shop, site = shop_behind_nginx
    # the test's self-signed certificate
    page = new_page(ignore_https_errors=True)
    page.goto(f"https://127.0.0.1:{site.ports.https}/orders/new")
    expect(page.get_by_role("heading", level=1)).to_have_text("Place an order")
    fill_form(page)
    continue_to_review(page)
    before = shop.orders()

    # gunicorn stopped: nothing listens on its port
    shop.__exit__(None, None, None)
    try:
        with page.expect_response(SUBMIT) as answered:
            button(page).click()
        refused = answered.value
        assert refused.status == 502, refused.status
        # server_tokens off: no version
        assert refused.headers["server"] == "nginx"
        # the shop's page, not nginx's
        assert "We are briefly unavailable" in refused.text()
        assert "nginx" not in refused.text()

        notice = page.locator("#submit-unknown")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text(UNKNOWN)
        expect(button(page)).to_have_accessible_name("Check my order")
        expect(button(page)).not_to_have_attribute("aria-disabled", "true")
        expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")
        for field in ("name", "email", "quantity"):
            expect(page.locator("#order-review")).to_contain_text(CUSTOMER[field])
        expect(page.locator("body")).not_to_contain_text(re.compile("nginx|Bad Gateway"))
        expect(page.get_by_text("Placing your order…")).to_have_count(0)
    finally:
        # the same port: nginx's upstream, unchanged
        shop.__enter__()

    with page.expect_response(SUBMIT) as checked:
        # the check, answered by the restarted gunicorn
        button(page).click()
    assert checked.value.status == 200 and checked.value.json()["status"] == "not_done"
    expect(page.locator("#submit-not-done")).to_be_visible()
    expect(page.locator("#submit-not-done")).to_contain_text(NOT_PLACED)
    expect(page.locator("#submit-unknown")).to_be_hidden()
    # the check placed nothing
    assert shop.orders() == before

    expect(button(page)).to_have_accessible_name("Place order")
    button(page).click()
    number = expect_confirmation(page, already_placed=False)
    assert page.url.startswith(f"https://127.0.0.1:{site.ports.https}/orders/")
    assert shop.orders() == [*before, number]
