"""The library's booking in two steps (flask-submit-once/examples/booking_in_steps/) in
headless Chromium, served by gunicorn (two workers) over the suite's Redis and PostgreSQL:
however the user goes Back and forward between the steps, only the last step books, once,
and the page lands on that booking.

Each test checks what the user sees, the token each step's page carries, and the rows in
PostgreSQL; the figures are in the messages.
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
    example_servers,
    page,
    serve,
    token_on,
)

NAME = "booking_in_steps"
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


def book(page: Page) -> str:
    """Choose the day and press Book; where the page landed."""
    page.get_by_label("Day").fill(DAY)
    status = press(page, "Book")
    expect(page).to_have_url(BOOKED_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("You are booked")
    assert status == 303, f"Book answered {status}"
    return page.url


def bookings(server) -> list[str]:
    return server.column("appointments_in_steps", "name")


@pytest.fixture
def server(serve):
    return serve(NAME)


def test_next_back_next_book_books_once_with_the_first_pages_token(page, server):
    token = first_step(page, server)
    next_step(page)
    second = token_on(page)
    # Back: the first step as it was, its token and input
    page.go_back()
    expect(page.get_by_label("Name")).to_have_value("Ada")
    shown = token_on(page)
    next_step(page)
    again = token_on(page)
    landed = book(page)
    figures = f"tokens {token[:6]} {second[:6]} {shown[:6]} {again[:6]}, rows {bookings(server)}"
    assert token == second == shown == again and bookings(server) == ["Ada"], figures
    assert page.get_by_text(f"Ada, on {DAY}").is_visible(), landed


def test_next_back_forward_book_books_once(page, server):
    token = first_step(page, server)
    next_step(page)
    page.go_back()
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    # Forward: the second step as it was
    page.go_forward()
    expect(page.get_by_text("Step 2 of 2")).to_be_visible()
    assert token_on(page) == token
    book(page)
    assert bookings(server) == ["Ada"]


def test_book_back_back_next_book_lands_on_the_first_booking_and_books_nothing(page, server):
    token = first_step(page, server)
    next_step(page)
    first = book(page)
    # Back: the second step as it was (the answer to a POST, from the browser's cache)
    page.go_back()
    expect(page.get_by_text("Step 2 of 2")).to_be_visible()
    assert token_on(page) == token
    page.go_back()
    # the first step as it was: the spent token, the input as typed
    expect(page.get_by_text("Step 1 of 2")).to_be_visible()
    expect(page.get_by_label("Email")).to_have_value("ada@example.com")
    shown = token_on(page)
    next_step(page)
    carried = token_on(page)
    second = book(page)
    figures = f"tokens {token[:6]} {shown[:6]} {carried[:6]}, rows {bookings(server)}"
    assert token == shown == carried and bookings(server) == ["Ada"], figures
    assert first == second, f"landed on {first} then {second}"


def test_a_typo_at_the_first_step_keeps_the_input_and_the_token(page, server):
    token = first_step(page, server)
    page.get_by_label("Email").fill("ada@example")
    # the browser lets it pass; the step not
    assert press(page, "Next") == 422
    expect(page.get_by_text("Invalid email address.")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_value("Ada")
    assert token_on(page) == token
    page.get_by_label("Email").fill("ada@example.com")
    next_step(page)
    assert token_on(page) == token
    book(page)
    assert bookings(server) == ["Ada"]


def test_book_back_book_lands_on_the_first_booking(page, server):
    first_step(page, server)
    next_step(page)
    first = book(page)
    page.go_back()
    expect(page.get_by_text("Step 2 of 2")).to_be_visible()
    second = book(page)
    assert first == second and bookings(server) == ["Ada"], f"{first} {second}"


def test_the_example_imports_only_flask_submit_once_of_this_repository():
    source = (EXAMPLES / NAME / "app.py").read_text()
    imported = set(re.findall(r"^(?:from|import) (\w+)", source, re.M))
    assert imported & {"submit_once", "webapp", "dev", "tests"} == set()
    assert "flask_submit_once" in imported
