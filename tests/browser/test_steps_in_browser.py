"""The library's booking in two steps (flask-submit-once/examples/booking_in_steps/) in
headless Chromium, served by gunicorn (two workers) over the suite's Redis and PostgreSQL:
however the user goes Back and forward between the steps, only the last step books, once,
and the page lands on that booking. Without JavaScript each step is a page of its own;
with it, htmx swaps each step in place; under Turbo (turbo_booking_in_steps/) the steps
live in a turbo-frame.

Each test checks what the user sees, the token each step's page carries, and the rows in
PostgreSQL; the figures are in the messages. No page may break its Content-Security-Policy.
"""

# The examples' fixtures are imported to be used by name, as test arguments.
# ruff: noqa: F401, F811

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_examples_in_browser import (
    EXAMPLES,
    click_twice,
    example_servers,
    page,
    serve,
    token_on,
)

NAME = "booking_in_steps"
TURBO = "turbo_booking_in_steps"
BOOKED_URL = re.compile(r"/booked/[\w-]{22}$")
DAY = (date.today() + timedelta(days=7)).isoformat()


def first_step(page: Page, server) -> str:
    """The first step, filled in; the token it was issued (the booking's)."""
    page.goto(server.url)
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    page.get_by_label("Name").fill("Ada")
    page.get_by_label("Email").fill("ada@example.com")
    return token_on(page)


def press(page: Page, button: str) -> int:
    """Press ``button``; the status of the POST's answer."""
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name=button).click()
    return answer.value.status


def next_step(page: Page) -> None:
    assert press(page, "Next") == 200
    expect(page.get_by_text("Step 2 of 2")).to_be_visible()


def book(page: Page, *, status: int = 303) -> str:
    """Choose the day and press Book; where the page landed (``status``: the answer
    expected, 200 with ``HX-Redirect`` under htmx)."""
    page.get_by_label("Day").fill(DAY)
    answered = press(page, "Book")
    expect(page).to_have_url(BOOKED_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("You are booked")
    assert answered == status, f"Book answered {answered}"
    return page.url


def bookings(server) -> list[str]:
    return server.column("appointments_in_steps", "name")


@pytest.fixture
def server(serve):
    return serve(NAME)


@pytest.fixture
def plain(new_page) -> Page:
    """A page with JavaScript off: each step a page of its own, sent as a plain form."""
    return new_page(java_script_enabled=False)


def test_next_back_next_book_books_once_with_the_first_pages_token(plain, server):
    token = first_step(plain, server)
    next_step(plain)
    second = token_on(plain)
    # Back: the first step as it was, its token and input
    plain.go_back()
    expect(plain.get_by_label("Name")).to_have_value("Ada")
    shown = token_on(plain)
    next_step(plain)
    again = token_on(plain)
    landed = book(plain)
    figures = f"tokens {token[:6]} {second[:6]} {shown[:6]} {again[:6]}, rows {bookings(server)}"
    assert token == second == shown == again and bookings(server) == ["Ada"], figures
    assert plain.get_by_text(f"Ada, on {DAY}").is_visible(), landed


def test_next_back_forward_book_books_once(plain, server):
    token = first_step(plain, server)
    next_step(plain)
    plain.go_back()
    expect(plain.get_by_text("Step 1 of 2")).to_be_visible()
    # Forward: the second step as it was
    plain.go_forward()
    expect(plain.get_by_text("Step 2 of 2")).to_be_visible()
    assert token_on(plain) == token
    book(plain)
    assert bookings(server) == ["Ada"]


def test_book_back_back_next_book_lands_on_the_first_booking_and_books_nothing(plain, server):
    token = first_step(plain, server)
    next_step(plain)
    first = book(plain)
    # Back: the second step as it was (the answer to a POST, from the browser's cache)
    plain.go_back()
    expect(plain.get_by_text("Step 2 of 2")).to_be_visible()
    assert token_on(plain) == token
    plain.go_back()
    # the first step as it was: the spent token, the input as typed
    expect(plain.get_by_text("Step 1 of 2")).to_be_visible()
    expect(plain.get_by_label("Email")).to_have_value("ada@example.com")
    shown = token_on(plain)
    next_step(plain)
    carried = token_on(plain)
    second = book(plain)
    figures = f"tokens {token[:6]} {shown[:6]} {carried[:6]}, rows {bookings(server)}"
    assert token == shown == carried and bookings(server) == ["Ada"], figures
    assert first == second, f"landed on {first} then {second}"


def test_a_typo_at_the_first_step_keeps_the_input_and_the_token(plain, server):
    token = first_step(plain, server)
    plain.get_by_label("Email").fill("ada@example")
    # the browser lets it pass; the step not
    assert press(plain, "Next") == 422
    expect(plain.get_by_text("Invalid email address.")).to_be_visible()
    expect(plain.get_by_label("Name")).to_have_value("Ada")
    assert token_on(plain) == token
    plain.get_by_label("Email").fill("ada@example.com")
    next_step(plain)
    assert token_on(plain) == token
    book(plain)
    assert bookings(server) == ["Ada"]


def test_book_back_back_other_details_next_book_is_told_and_books_nothing(plain, server):
    """The second Book is `changed` (409): the second step again with the new input, a
    link to the first booking and a fresh token; nothing booked until it is sent."""
    token = first_step(plain, server)
    next_step(plain)
    first = book(plain)
    plain.go_back()
    plain.go_back()
    expect(plain.get_by_text("Step 1 of 2")).to_be_visible()
    plain.get_by_label("Name").fill("Grace")
    plain.get_by_label("Email").fill("grace@example.com")
    next_step(plain)
    plain.get_by_label("Day").fill(DAY)
    assert press(plain, "Book") == 409
    expect(plain.get_by_role("alert")).to_contain_text("already used, with other details")
    expect(plain.get_by_text("for Grace (grace@example.com)")).to_be_visible()
    link = plain.get_by_role("link", name="The booking you made first")
    expect(link).to_have_attribute("href", first.removeprefix(server.url[:-1]))
    fresh = token_on(plain)
    assert fresh not in ("", token) and bookings(server) == ["Ada"], bookings(server)
    book(plain)
    assert bookings(server) == ["Ada", "Grace"]


def test_book_back_book_lands_on_the_first_booking(plain, server):
    first_step(plain, server)
    next_step(plain)
    first = book(plain)
    plain.go_back()
    expect(plain.get_by_text("Step 2 of 2")).to_be_visible()
    second = book(plain)
    assert first == second and bookings(server) == ["Ada"], f"{first} {second}"


@pytest.mark.parametrize("name", [NAME, TURBO])
def test_the_examples_import_only_flask_submit_once_of_this_repository(name):
    source = (EXAMPLES / name / "app.py").read_text()
    imported = set(re.findall(r"^(?:from|import) (\w+)", source, re.M))
    assert imported & {"submit_once", "webapp", "dev", "tests"} == set()
    assert imported & {"flask_submit_once", NAME}


@pytest.mark.parametrize(("name", "asset"), [(NAME, "htmx.min.js"), (TURBO, "turbo.es2017-umd.js")])
def test_the_examples_carry_the_vendored_copy_of_their_library(name, asset):
    copy = EXAMPLES / name / "static" / asset
    vendored = EXAMPLES.parents[1] / "static" / "vendor" / asset
    assert copy.read_bytes() == vendored.read_bytes(), "run scripts/vendor-js"


def test_htmx_swaps_each_step_in_place_and_books_once_with_the_first_pages_token(page, server):
    token = first_step(page, server)
    next_step(page)
    # swapped in place: the same page, the same token
    assert page.url == server.url and token_on(page) == token
    book(page, status=200)
    assert bookings(server) == ["Ada"]


def test_htmx_typo_at_the_first_step_is_swapped_in_with_the_input_and_the_token(page, server):
    token = first_step(page, server)
    page.get_by_label("Email").fill("ada@example")
    assert press(page, "Next") == 422
    expect(page.get_by_text("Invalid email address.")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_value("Ada")
    assert page.url == server.url and token_on(page) == token
    page.get_by_label("Email").fill("ada@example.com")
    next_step(page)
    book(page, status=200)
    assert bookings(server) == ["Ada"]


def test_htmx_book_back_next_book_lands_on_the_first_booking(page, server):
    """Under htmx the steps are one page: Back leaves the booking for the first step as it
    was first drawn, with the booking's token, so booking again lands on the first."""
    token = first_step(page, server)
    next_step(page)
    first = book(page, status=200)
    page.go_back()
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    # as first drawn: the booking's token, the fields empty
    expect(page.get_by_label("Name")).to_have_value("")
    expect(page.get_by_label("Email")).to_have_value("")
    shown = token_on(page)
    page.get_by_label("Name").fill("Ada")
    page.get_by_label("Email").fill("ada@example.com")
    next_step(page)
    second = book(page, status=200)
    figures = f"tokens {token[:6]} {shown[:6]}, rows {bookings(server)}, at {first} {second}"
    assert token == shown and first == second and bookings(server) == ["Ada"], figures


def test_htmx_book_back_other_details_next_book_is_told_and_books_nothing(page, server):
    token = first_step(page, server)
    next_step(page)
    first = book(page, status=200)
    page.go_back()
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    page.get_by_label("Name").fill("Grace")
    page.get_by_label("Email").fill("grace@example.com")
    next_step(page)
    page.get_by_label("Day").fill(DAY)
    status = press(page, "Book")
    expect(page.get_by_role("alert")).to_contain_text("already used, with other details")
    expect(page.get_by_text("for Grace (grace@example.com)")).to_be_visible()
    link = page.get_by_role("link", name="The booking you made first")
    expect(link).to_have_attribute("href", first.removeprefix(server.url[:-1]))
    # swapped in with a fresh token: sent, it books Grace
    fresh = token_on(page)
    figures = f"answer {status}, rows {bookings(server)}, tokens {token[:6]} {fresh[:6]}"
    assert status == 409 and page.url == server.url and bookings(server) == ["Ada"], figures
    assert fresh not in ("", token), figures
    book(page, status=200)
    assert bookings(server) == ["Ada", "Grace"]


@pytest.mark.parametrize("example", [NAME, TURBO])
def test_back_from_the_second_step_under_javascript_leaves_the_flow_and_books_nothing(
    page, serve, example
):
    """htmx swaps the second step in, Turbo into its frame: neither adds an entry to the
    browser's history, so Back from the second step goes to the page before the first
    (here the blank page the tab opened on), not to the first step. Forward shows the
    first step as first drawn: the booking's token, the fields empty; booked from there,
    once."""
    server = serve(example)
    token = first_step(page, server)
    next_step(page)
    page.go_back()
    expect(page).to_have_url("about:blank")
    assert bookings(server) == []
    page.go_forward()
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_value("")
    shown = token_on(page)
    page.get_by_label("Name").fill("Ada")
    page.get_by_label("Email").fill("ada@example.com")
    next_step(page)
    book(page, status=200 if example == NAME else 303)
    figures = f"tokens {token[:6]} {shown[:6]}, rows {bookings(server)}"
    assert shown == token and bookings(server) == ["Ada"], figures


def test_htmx_double_click_on_book_books_once(page, server):
    first_step(page, server)
    next_step(page)
    page.get_by_label("Day").fill(DAY)
    click_twice(page, page.get_by_role("button", name="Book"))
    expect(page).to_have_url(BOOKED_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("You are booked")
    assert bookings(server) == ["Ada"]


@pytest.fixture
def turbo(serve):
    return serve(TURBO)


def test_turbo_swaps_each_step_in_its_frame_and_books_once_with_the_first_pages_token(page, turbo):
    token = first_step(page, turbo)
    page.locator("h1").evaluate("h1 => h1.dataset.marker = 'this page'")
    next_step(page)
    # the frame alone: the same page, the same token
    assert page.locator("h1[data-marker]").count() == 1
    assert page.url == turbo.url and token_on(page) == token
    book(page)
    assert bookings(turbo) == ["Ada"]


def test_turbo_typo_at_the_first_step_is_shown_in_the_frame_with_the_input_and_the_token(
    page, turbo
):
    token = first_step(page, turbo)
    page.get_by_label("Email").fill("ada@example")
    assert press(page, "Next") == 422
    expect(page.get_by_text("Invalid email address.")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_value("Ada")
    assert token_on(page) == token
    page.get_by_label("Email").fill("ada@example.com")
    next_step(page)
    book(page)
    assert bookings(turbo) == ["Ada"]


def test_turbo_double_click_on_book_books_once(page, turbo):
    first_step(page, turbo)
    next_step(page)
    page.get_by_label("Day").fill(DAY)
    click_twice(page, page.get_by_role("button", name="Book"))
    expect(page).to_have_url(BOOKED_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("You are booked")
    assert bookings(turbo) == ["Ada"]


def test_turbo_back_from_the_booking_fetches_a_fresh_empty_first_step(page, turbo):
    # Turbo 8 drops its snapshots after every non-GET submit: Back fetches the first step
    # afresh, a new token and no input, so a booking from there is a new one.
    token = first_step(page, turbo)
    next_step(page)
    book(page)
    page.go_back()
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_value("")
    assert token_on(page) not in ("", token), "Back showed the spent token"
    assert bookings(turbo) == ["Ada"]
    # a booking from there is a new one
    page.get_by_label("Name").fill("Grace")
    page.get_by_label("Email").fill("grace@example.com")
    next_step(page)
    book(page)
    assert bookings(turbo) == ["Ada", "Grace"]
