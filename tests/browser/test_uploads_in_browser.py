"""The library's referral letter (flask-submit-once/examples/referral_letter/) in headless
Chromium, served by gunicorn (two workers) over the suite's Redis and PostgreSQL, with
htmx and with JavaScript off: a letter picked once, sent with a form that comes back (a
date of birth to come), is kept; the form sent again without picking it, double-clicked,
makes one referral with the letter's bytes, and the page lands on it.

No page may break its Content-Security-Policy.
"""

# The examples' fixtures are imported to be used by name, as test arguments.
# ruff: noqa: F401, F811

from __future__ import annotations

import hashlib
import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_examples_in_browser import (
    click_twice,
    example_servers,
    open_form,
    page,
    post_statuses,
    serve,
)

NAME = "referral_letter"
RECEIPT_URL = re.compile(r"/referrals/[\w-]{22}$")
LETTER = b"%PDF-1.7\n" + bytes(range(256)) * 256


@pytest.fixture(params=[True, False], ids=["htmx", "without-js"])
def browser_page(request, new_page, page) -> Page:
    """The example's page with htmx, then with JavaScript off (a plain form)."""
    return page if request.param else new_page(java_script_enabled=False)


def test_a_letter_kept_on_a_422_is_sent_once_with_the_correction(browser_page, serve):
    server = serve(NAME)
    page = browser_page
    statuses = post_statuses(page)
    open_form(page, server)
    page.get_by_label("Patient's full name").fill("Ada Lovelace")
    page.get_by_label("Date of birth").fill("2815-12-10")
    page.get_by_label("Referral letter").set_input_files(
        {"name": "letter.pdf", "mimeType": "application/pdf", "buffer": LETTER}
    )
    # a date of birth to come: the form again, the letter kept
    with page.expect_response(lambda r: r.request.method == "POST"):
        page.get_by_role("button", name="Send the referral").click()
    expect(page.get_by_text("Give a date of birth in the past.")).to_be_visible()
    expect(page.locator("#letter-kept")).to_contain_text("Kept: letter.pdf")
    expect(page.get_by_label("Patient's full name")).to_have_value("Ada Lovelace")
    # the browser shows the file input empty, and the letter is not picked again
    assert page.get_by_label("Referral letter").input_value() == ""
    page.get_by_label("Date of birth").fill("1815-12-10")
    click_twice(page, page.get_by_role("button", name="Send the referral"))
    expect(page).to_have_url(RECEIPT_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text("Referral received")
    expect(page.locator("#letter-sha256")).to_have_text(hashlib.sha256(LETTER).hexdigest())
    expect(page.locator("#letter")).to_have_text("letter.pdf")
    rows = server.column("referrals", "patient")
    assert rows == ["Ada Lovelace"], f"rows {rows}, answers {statuses}"
    assert statuses[0] == 422 and all(status in (200, 303) for status in statuses[1:]), statuses
