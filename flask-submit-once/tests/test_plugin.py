"""The pytest plugin (``flask_submit_once.testing``), used as a user's suite uses it: the
``once_forms`` fixture over the suite's ``client``, on an app as it runs live."""

from __future__ import annotations

import pytest

from flask_submit_once.testing import landed_on

ADA = {"email": "ada@example.com", "name": "Ada", "quantity": "2"}
HTMX = {"HX-Request": "true"}
# tokens an address a minute, in windows aligned to the clock
LIVE_CAP = 120
# 3 tokens a page: over twice the cap, whatever the clock
PAGES = 2 * LIVE_CAP // 3 + 1


@pytest.fixture
def app(make_app):
    """The app as it runs live (not TESTING): the per-address cap is on."""
    return make_app(TESTING=False)


def test_the_per_address_cap_would_trip_a_suite_that_opens_many_forms(app):
    client = app.test_client()
    statuses = []
    while len(statuses) < PAGES and 429 not in statuses:
        statuses.append(client.get("/signup").status_code)
    assert statuses[-1] == 429 and statuses[: LIVE_CAP // 3] == [200] * (LIVE_CAP // 3)


def test_once_forms_turns_the_per_address_cap_off(once_forms):
    """As a suite runs: many tests, each its own browser session, all from one address
    (a new session every 30 pages: one session has a cap of its own, 200 a TTL)."""
    opened = []
    for page in range(PAGES):
        if page % 30 == 0:
            once_forms.client.delete_cookie("session")
        opened.append(once_forms.open("/signup").token)
    assert all(opened)


def test_submit_concurrently_sends_json_from_tabs_of_one_session(once_forms, signups):
    page = once_forms.open("/signup")
    answers = page.submit_concurrently([ADA] * 5, json=True)
    assert sorted(answer.status_code for answer in answers) == [200, 200, 200, 200, 201]
    assert once_forms.assert_once(answers, rows=lambda: len(signups())) == "/thanks/1"


def test_assert_once_follows_htmx_answers_in_place_by_their_content_location(once_forms, sessions):
    from sqlalchemy import func, select

    from signup_app import Comment

    def comments() -> int:
        with sessions() as db:
            return db.scalar(select(func.count()).select_from(Comment))

    page = once_forms.open("/signup", form=1)
    answers = page.submit_concurrently([{"text": "Hi"}] * 4, headers=HTMX)
    assert {answer.status_code for answer in answers} <= {200, 201}
    assert once_forms.assert_once(answers, rows=comments) == "/comments/1"
    with pytest.raises(AssertionError, match="2 rows"):
        page2 = once_forms.open("/signup", form=1)
        once_forms.assert_once(
            [*answers, page2.submit({"text": "Hi"}, headers=HTMX)], rows=comments
        )


def test_landed_on_reads_where_an_answer_took_the_user(once_forms):
    page = once_forms.open("/signup")
    invalid = page.submit({**ADA, "email": ""})
    assert landed_on(invalid) is None
    # HX-Redirect
    assert landed_on(page.submit(ADA, headers=HTMX)) == "/thanks/1"
    # Location
    assert landed_on(page.submit(ADA)) == "/thanks/1"
    # a script's 200
    assert landed_on(page.submit(ADA, json=True)) == "/thanks/1"
