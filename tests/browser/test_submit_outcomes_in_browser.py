"""A JavaScript submit that gets no answer of the shop's never
leaves the shopper waiting without words. gunicorn stopped, restarted mid-submit, too slow
to answer, or a proxy's 502/503/504 in its place: the form says the order may or may not be
placed, keeps what was typed, and its button asks the shop (``X-Submit-Once-Check``). A
refusal (403 and every other 4xx) says what happened, never "see your order".

The check's answers come from the server (Flask-Submit-Once answers a POST with
``X-Submit-Once-Check: 1`` from the token: placed and where, still running, or not placed);
the script's side of that contract is also tested with answers fulfilled in the browser,
those it must not trust among them."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from urllib.parse import parse_qsl

import pytest
from playwright.sync_api import Page, Route, expect
from sqlalchemy import text
from werkzeug.serving import make_server

from tests.browser.shop import (
    CUSTOMER,
    ORDER_URL,
    PHONE,
    Shop,
    continue_to_review,
    expect_confirmation,
    fill_form,
    open_form,
    refuse_as_cross_site,
)
from tests.support.money_states import STATES, put_order_in
from tests.support.pauses import after_consume

DEVICES = {"desktop": {}, "phone": PHONE}

UNKNOWN = "We could not reach the shop, so your order may or may not be placed."
NOT_PLACED = "Your order was not placed."


@pytest.fixture(params=list(DEVICES))
def device_page(request, new_page) -> Page:
    """A page at desktop size, then on a 375 px phone."""
    return new_page(**DEVICES[request.param])


def button(page: Page):
    return page.locator("form[data-submit-once] button[type=submit]")


def expect_unknown(page: Page) -> None:
    """The outage notice, the input kept, and the button usable as "Check my order"."""
    expect(page.locator("#submit-unknown")).to_be_visible()
    expect(page.locator("#submit-unknown")).to_contain_text(UNKNOWN)
    expect(page.locator("#submit-unknown")).to_be_focused()
    expect(button(page)).to_have_accessible_name("Check my order")
    expect(button(page)).not_to_have_attribute("aria-disabled", "true")
    expect(page.locator("#order-review")).to_contain_text(CUSTOMER["name"])
    expect(page.get_by_text("Placing your order…")).to_have_count(0)


@pytest.fixture(scope="module")
def stoppable_shop(servers) -> Iterator[Shop]:
    """A gunicorn of this module's own, which its tests stop and start again (one worker:
    it starts in half the time); each test leaves it running."""
    with Shop(servers, workers=1) as live:
        yield live


@pytest.fixture(scope="module")
def pausing_shop(servers) -> Iterator[Shop]:
    """The same, holding every submit's answer back for 30 s after its COMMIT."""
    with Shop(servers, workers=1, TEST_PAUSE_AFTER_COMMIT="30") as live:
        yield live


@contextmanager
def stopped(shop: Shop) -> Iterator[None]:
    """gunicorn stopped (a request in flight is cut off after its 2 s grace), then
    started again on the same port."""
    shop.__exit__(None, None, None)
    try:
        yield
    finally:
        shop.__enter__()


def form_then_down(page: Page, shop: Shop) -> AbstractContextManager[None]:
    """The form filled in; then gunicorn stopped until the block ends."""
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    return stopped(shop)


def test_with_gunicorn_stopped_the_form_says_so_and_its_button_checks(device_page, stoppable_shop):
    """Was: "Placing your order…" for ever, the button disabled, no word."""
    page = device_page
    with form_then_down(page, stoppable_shop):
        button(page).click()
        expect_unknown(page)
        # the check, with the shop still away
        button(page).click()
        expect(page.locator("#submit-still-unknown")).to_be_visible()
        expect(page.locator("#submit-unknown")).to_be_hidden()
        expect(button(page)).to_have_accessible_name("Check my order")
        expect(button(page)).not_to_have_attribute("aria-disabled", "true")
    assert stoppable_shop.orders() == []


def test_once_gunicorn_is_back_the_check_says_nothing_was_placed_and_the_form_places_it(
    device_page, stoppable_shop
):
    page = device_page
    with form_then_down(page, stoppable_shop):
        button(page).click()
        expect_unknown(page)
    button(page).click()
    expect(page.locator("#submit-not-done")).to_be_visible(timeout=5_000)
    # the check placed nothing
    assert stoppable_shop.orders() == []
    expect(button(page)).to_have_accessible_name("Place order")
    button(page).click()
    number = expect_confirmation(page, already_placed=False)
    assert stoppable_shop.orders() == [number]


def submit_then_restart(page: Page, shop: Shop) -> None:
    """Submit; once the order is committed and its answer held back, restart gunicorn."""
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    seen = shop.pauses("commit")
    button(page).click()
    shop.wait_for_pause("commit", seen)
    with stopped(shop):
        pass


def test_gunicorn_restarted_mid_submit_says_the_order_may_be_placed(device_page, pausing_shop):
    """The order was committed, its answer lost with the worker: the form cannot know
    which, and says so, with the button that asks."""
    page = device_page
    submit_then_restart(page, pausing_shop)
    expect_unknown(page)
    assert len(pausing_shop.orders()) == 1


def test_after_a_restart_mid_submit_the_check_lands_on_the_order_placed(device_page, pausing_shop):
    page = device_page
    submit_then_restart(page, pausing_shop)
    expect_unknown(page)
    button(page).click()
    expect(page).to_have_url(ORDER_URL, timeout=5_000)
    assert [expect_confirmation(page, already_placed=None)] == pausing_shop.orders()


def test_a_submit_unanswered_in_time_says_the_outcome_is_unknown(page, slow_shop):
    """The bound is htmx's timeout (15 s, templates/htmx_head.html); shortened here below
    the slow shop's pause so the submit outlasts it."""
    open_form(page, slow_shop)
    fill_form(page)
    continue_to_review(page)
    page.evaluate("() => { htmx.config.timeout = 300; }")
    button(page).click()
    expect_unknown(page)
    # The shop went on with the submit the browser gave up on: one order, placed once
    # (and not left running into the next test).
    assert len(slow_shop.wait_for_orders(1)) == 1


@contextmanager
def held_submits(make_app) -> Iterator[tuple[str, threading.Event]]:
    """The app served in this process, every submit held after spending its token until
    the event is set: (its address, the event)."""
    release = threading.Event()
    app = make_app()
    after_consume(app, lambda: release.wait(30))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", release
    finally:
        release.set()
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_the_check_of_a_submit_still_running_says_so_then_lands_on_the_order(
    page, make_app, servers
):
    with held_submits(make_app) as (url, release):
        page.goto(f"{url}/orders/new")
        fill_form(page)
        continue_to_review(page)
        page.evaluate("() => { htmx.config.timeout = 300; }")
        button(page).click()
        # held: no answer in time
        expect_unknown(page)
        button(page).click()
        # still held: running
        expect(page.locator("#submit-running")).to_be_visible()
        # the submit places the order; the next check finds it
        release.set()
        expect(page).to_have_url(ORDER_URL)
        number = expect_confirmation(page, already_placed=None)
        with servers.engine.connect() as conn:
            assert list(conn.scalars(text("SELECT public_id FROM orders"))) == [number]


def fulfil_submit(page: Page, status: int, body: str, content_type: str = "text/html") -> None:
    """Answer the form's POST in the browser as a proxy in front of the shop would."""
    page.route(
        re.compile(r"/orders$"),
        lambda route: route.fulfill(status=status, body=body, content_type=content_type),
    )


NGINX = "<html><head><title>{0}</title></head><body><center><h1>{0}</h1></center></body></html>"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, NGINX.format("502 Bad Gateway")),
        # not the shop's form: no swap
        (503, NGINX.format("503 Service Temporarily Unavailable")),
        (504, NGINX.format("504 Gateway Time-out")),
        (500, "Internal Server Error"),
        (200, "<p>Sign in to this Wi-Fi network</p>"),
    ],
    ids=["502", "503", "504", "500", "200-not-ours"],
)
def test_an_answer_that_is_not_the_shops_says_the_outcome_is_unknown(page, shop, status, body):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    fulfil_submit(page, status, body)
    button(page).click()
    expect_unknown(page)
    expect(page.get_by_text("Bad Gateway")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your order")


def test_a_403_says_what_happened_and_never_to_see_an_order_that_does_not_exist(device_page, shop):
    """Was: the page reloaded and said "Press Place order to see your order": 3 presses,
    3 × 403, no order."""
    page = device_page
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    page.route(re.compile(r"/orders$"), refuse_as_cross_site)
    # gone if the page reloads
    page.evaluate("() => { window.sameDocument = true; }")
    mark = shop.posts_received()
    refused = page.locator("#submit-refused")
    for presses in (1, 2, 3):
        # Waiting on the answer in the browser runs the route, which a wait in Python
        # (posts_since) would hold up: the sync API serves routes only while it is called.
        with page.expect_response(re.compile(r"/orders$")) as answer:
            button(page).click()
        assert answer.value.status == 403
        expect(refused).to_be_visible()
        expect(refused).to_contain_text(NOT_PLACED)
        expect(refused).to_contain_text(
            "This could not be done from here. We could not confirm "
            "that this form was sent from our own site"
        )
        expect(refused).to_contain_text("(Error 403)")
        assert shop.posts_since(mark, at_least=presses) == presses
        expect(button(page)).to_have_accessible_name("Place order")
        expect(button(page)).not_to_have_attribute("aria-disabled", "true")
    assert page.evaluate("() => window.sameDocument === true")
    expect(page.get_by_text("see your order")).to_have_count(0)
    expect(page.locator("#interrupted-notice")).to_be_hidden()
    expect(page.locator("#review-address")).to_contain_text("London SW1Y 4JH")
    assert shop.orders() == []
    # no submit is in flight: nothing to put back, nothing to claim
    page.reload()
    expect(page.locator("#interrupted-notice")).to_be_hidden()


def shop_refusal(make_app, status: int) -> tuple[str, str]:
    """The shop's own answer to an htmx request refused with ``status``: its error page
    (htmx swaps none of it) and the sentence that says when to try again, if any."""
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=1).test_client()
    client.get("/orders/new")
    answer = client.get(
        "/orders/new" if status == 429 else "/no-such-page", headers={"HX-Request": "true"}
    )
    assert answer.status_code == status and answer.headers["HX-Reswap"] == "none"
    wait = answer.headers.get("Retry-After")
    return answer.text, f"Please try again in {wait} seconds." if wait else ""


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (413, "The shop did not accept this form."),
        (429, "Too many forms opened. Very many forms were opened"),
        (404, "Page not found. There is no page at this address."),
    ],
    ids=["413-proxy", "429-shop", "404-shop"],
)
def test_every_other_refusal_says_what_happened(page, shop, make_app, stopped_clock, status, says):
    """A refusal of the shop's is said in its words (its error page's), a proxy's in the
    form's; the order was not placed either way."""
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    # The shop's 429 counts per minute of the clock: stopped, its two views fall in one
    # minute and the wait is 60 s, never the "1 second" of a minute's last second.
    stopped_clock(0)
    body, when = (
        (NGINX.format("413 Request Entity Too Large"), "")
        if status == 413
        else shop_refusal(make_app, status)
    )
    fulfil_submit(page, status, body)
    button(page).click()
    refused = page.locator("#submit-refused")
    expect(refused).to_contain_text(NOT_PLACED)
    expect(refused).to_contain_text(says)
    expect(refused).to_contain_text(when)
    expect(refused).to_contain_text(f"(Error {status})")
    expect(button(page)).to_have_accessible_name("Place order")
    assert shop.orders() == []


# The script's side of the check, against the answers the server will give.
def check_answers(page: Page, *answers: dict) -> list[dict]:
    """Fulfil the submit with a 502, then each check with the next of ``answers``; the
    checks the script sent (headers and fields)."""
    seen: list[dict] = []
    queue = list(answers)

    def answer(route: Route) -> None:
        request = route.request
        if request.headers.get("x-submit-once-check") != "1":
            route.fulfill(status=502, body=NGINX.format("502 Bad Gateway"))
            return
        seen.append(
            {
                "headers": request.headers,
                "fields": dict(parse_qsl(request.post_data or "")),
                "url": request.url,
            }
        )
        route.fulfill(status=200, content_type="application/json", body=json.dumps(queue.pop(0)))

    page.route(re.compile(r"/orders$"), answer)
    return seen


def test_the_check_sends_the_same_tokens_and_a_not_done_answer_readies_the_form(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    token = page.locator("form[data-submit-once] input[name=form_token]").input_value()
    seen = check_answers(page, {"status": "not_done"})
    button(page).click()
    expect_unknown(page)
    # the review's details are hidden fields: changed by a script, not sent by the check
    page.locator("form[data-submit-once] input[name=name]").evaluate(
        "input => { input.value = 'Edited after the failure'; }"
    )
    button(page).click()
    expect(page.locator("#submit-not-done")).to_be_visible()
    expect(page.locator("#submit-not-done")).to_contain_text(NOT_PLACED)
    expect(button(page)).to_have_accessible_name("Place order")
    [check] = seen
    assert check["url"] == f"{shop.url}/orders"
    assert check["fields"]["form_token"] == token
    # what was sent, not edited since
    assert check["fields"]["name"] == CUSTOMER["name"]
    assert "application/json" in check["headers"]["accept"]


def test_a_running_answer_says_so_and_asks_again_until_done(page, shop):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    check_answers(
        page, {"status": "running"}, {"status": "done", "location": "/orders/new?checked=1"}
    )
    button(page).click()
    expect_unknown(page)
    button(page).click()
    expect(page.locator("#submit-running")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/orders/new\?checked=1$"))


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "done", "location": "https://elsewhere.example/orders/x"},
        {"status": "what"},
    ],
    ids=["done-elsewhere", "unknown-status"],
)
def test_a_check_answer_the_script_cannot_trust_leaves_the_check_to_try_again(page, shop, answer):
    open_form(page, shop)
    fill_form(page)
    continue_to_review(page)
    check_answers(page, answer)
    button(page).click()
    expect_unknown(page)
    button(page).click()
    expect(page.locator("#submit-still-unknown")).to_be_visible()
    assert page.url.startswith(shop.url)


def test_the_refund_form_says_its_request_may_or_may_not_be_taken(page, shop):
    key = put_order_in(shop.servers.engine, STATES["paid"])
    page.goto(f"{shop.url}/orders/{key}/refund")
    page.get_by_label("Amount to refund (€)").fill("5")
    page.route(
        re.compile(r"/refunds$"),
        lambda route: route.fulfill(status=504, body=NGINX.format("504 Gateway Time-out")),
    )
    page.get_by_role("button", name="Request refund").click()
    unknown = page.locator("#submit-unknown")
    expect(unknown).to_contain_text("your refund may or may not be requested")
    expect(button(page)).to_have_accessible_name("Check my request")
    expect(page.get_by_label("Amount to refund (€)")).to_have_value("5")
