"""Who may get a form token, and how many: the per-session and per-address caps, and
another site's page asking for forms it does not navigate to."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import select

from flask_submit_once.testing import OnceForms

# a page of three forms: three tokens a view
SIGNUP = "/signup"
CROSS_SITE = {"Sec-Fetch-Site": "cross-site"}


def token_keys(rdb) -> list[str]:
    return [key for key in rdb.keys("so:*") if not key.startswith("so:issued:")]


def until_refused(open_page, most: int) -> list[int]:
    """The statuses of up to ``most`` pages, stopping at the first refused."""
    statuses: list[int] = []
    while len(statuses) < most and 429 not in statuses:
        statuses.append(open_page())
    return statuses


# A cap counts in windows aligned to the clock, so any span of one window holds at most
# twice the cap: the tests open pages until well over that, and so never depend on where
# in its window they run.


def test_a_session_over_its_cap_is_told_when_to_come_back_and_gets_no_token(make_app, rdb):
    # two pages' worth
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_SESSION=6).test_client()
    answers = []

    def open_page() -> int:
        before = token_keys(rdb)
        answers.append((client.get(SIGNUP), before))
        return answers[-1][0].status_code

    statuses = until_refused(open_page, most=6)
    assert statuses[:2] == [200, 200] and statuses[-1] == 429
    refused, before = answers[-1]
    assert 0 < int(refused.headers["Retry-After"]) <= 3600
    assert "very many times" in refused.text and "Traceback" not in refused.text
    assert token_keys(rdb) == before


def test_an_address_over_its_cap_is_refused_and_another_address_is_not(make_app):
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=6)

    # a client that keeps no cookie: a new session each time
    def opens(address: str) -> int:
        return app.test_client().get(SIGNUP, environ_base={"REMOTE_ADDR": address}).status_code

    statuses = until_refused(lambda: opens("192.0.2.1"), most=5)
    assert statuses[:2] == [200, 200] and statuses[-1] == 429
    assert opens("192.0.2.2") == 200


def test_an_ipv6_subscriber_is_one_client_and_its_neighbours_are_not(make_app):
    # one page's worth
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=3)

    def opens(address: str) -> int:
        return app.test_client().get(SIGNUP, environ_base={"REMOTE_ADDR": address}).status_code

    # Every address of one /64 is one subscriber's: one budget (at most two pages).
    assert 429 in [opens(f"2001:db8:1:1::{n}") for n in (1, 2, 3)]
    # another /64 of the same /48
    assert opens("2001:db8:1:2::1") == 200
    assert 429 in [opens(address) for address in ("::ffff:192.0.2.9", "192.0.2.9") * 2]


def test_a_48_has_a_budget_of_its_own_and_nat64_is_read_as_its_ipv4(make_app, stopped_clock):
    """Was: a /48 held 65,536 budgets of a /64 each; NAT64 put every IPv4
    client behind it in one. (The clock is stopped: a page spent through NAT64 and the
    refusal of the next must fall in one window.)"""
    # one page's worth a /64
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=3)
    stopped_clock(0)

    def opens(address: str) -> int:
        return app.test_client().get(SIGNUP, environ_base={"REMOTE_ADDR": address}).status_code

    # One /48, a new /64 for every page: its wider budget runs out all the same.
    subnets = itertools.count()
    statuses = until_refused(lambda: opens(f"2001:db8:7:{next(subnets)}::1"), most=40)
    assert statuses[-1] == 429 and len(statuses) < 40
    # another /48
    assert opens("2001:db8:8::1") == 200
    # NAT64: the IPv4 client's own budget, shared with its plain IPv4 address.
    assert opens("64:ff9b::c000:20a") == 200
    # one page's worth, spent through NAT64
    assert opens("192.0.2.10") == 429
    # another IPv4 client, same NAT64 /64
    assert opens("64:ff9b::c000:20b") == 200


def test_a_live_app_caps_per_address_by_default_and_a_test_app_does_not(make_app):
    assert make_app(TESTING=False).config["SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"] == 120
    assert make_app(TESTING=True).config["SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"] == 0
    assert make_app().config["SUBMIT_ONCE_MAX_FORMS_PER_SESSION"] == 200


@pytest.mark.parametrize(
    "headers",
    [
        *(
            {**CROSS_SITE, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": dest}
            for dest in ("iframe", "frame", "object", "embed")
            # all were 200: our form inside another site's page
        ),
        {**CROSS_SITE, "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "iframe"},
        {**CROSS_SITE, "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
        {"Sec-Purpose": "prefetch"},
        {"Purpose": "prefetch"},
    ],
    ids=[
        "iframe",
        "frame",
        "object",
        "embed",
        "no-cors-iframe",
        "script",
        "prefetch",
        "old-prefetch",
    ],
)
def test_another_sites_page_that_does_not_navigate_gets_no_form(client, rdb, headers):
    answer = client.get(SIGNUP, headers=headers)
    assert answer.status_code == 403 and "only from our own pages" in answer.text
    # nothing counted
    assert token_keys(rdb) == [] and rdb.keys("so:issued:*") == []


def test_a_link_from_another_site_opens_the_form(client, rdb):
    answer = client.get(
        SIGNUP, headers={**CROSS_SITE, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    )
    assert answer.status_code == 200 and len(token_keys(rdb)) == 3


# The caps limit the forms a session may open, never a submit: a submit that landed is
# answered as saved, and one that did not keeps what the user typed.

#: One page's worth: the sign-up page (three forms) opens, and no other form after it. The
#: tests stop the clock, so that the page and what follows fall in one window of the cap.
AT_THE_CAP = {"SUBMIT_ONCE_MAX_FORMS_PER_SESSION": 3}
HTMX = {"HX-Request": "true"}
ADA = {"email": "ada@example.com", "name": "Ada", "quantity": "2"}


def test_a_submit_at_the_cap_is_taken_to_its_result(make_app, signups, stopped_clock):
    stopped_clock(0)
    forms = OnceForms(make_app(**AT_THE_CAP).test_client())
    page = forms.open(SIGNUP)
    answers = [page.submit(ADA), page.submit(ADA, headers=HTMX)]
    assert [answer.status_code for answer in answers] == [303, 200]
    assert forms.assert_once(answers, rows=lambda: len(signups())) == "/thanks/1"


def test_an_htmx_submit_at_the_cap_is_answered_in_place_and_says_how_to_go_on(
    make_app, sessions, stopped_clock
):
    """The result swapped in carries the next form, whose token cannot be had: the
    answer is still the saved result (it was a 429, the user saw nothing and sent it
    again), and where the token would be the form says how to get another."""
    from signup_app import Comment

    stopped_clock(0)
    forms = OnceForms(make_app(**AT_THE_CAP).test_client())
    # the comment form, answered in place
    page = forms.open(SIGNUP, form=1)
    answers = page.submit_twice({"text": "First!"}, headers=HTMX)
    assert [answer.status_code for answer in answers] == [201, 200]
    for answer in answers:
        assert '<p class="comment" id="comment-1">First!</p>' in answer.text
        assert answer.headers["Content-Location"] == "/comments/1"
        assert forms.page(SIGNUP, answer.text).token is None
        assert "reload the page" in answer.text
    with sessions() as db:
        assert db.scalars(select(Comment.text)).all() == ["First!"]


def test_an_edited_resubmit_at_the_cap_keeps_its_input_until_it_can_be_saved(
    make_app, signups, stopped_clock
):
    """Back, edit, submit: "changed" needs a fresh token, which the cap refuses. The form
    comes back with the input and the token it was sent with (429, Retry-After); sent
    again once a form can be had, it is told "changed" with a fresh token, as ever."""
    stopped_clock(0)
    app = make_app(**AT_THE_CAP)
    forms = OnceForms(app.test_client())
    page = forms.open(SIGNUP)
    assert page.submit(ADA).status_code == 303
    grace = {**ADA, "email": "grace@example.com"}
    for headers in ({}, HTMX):
        kept = page.submit(grace, headers=headers)
        assert kept.status_code == 429 and 'value="grace@example.com"' in kept.text
        assert 0 < int(kept.headers["Retry-After"]) <= 3600
        assert "nothing new was saved" in kept.text.lower() and "/thanks/1" in kept.text
        assert forms.page(SIGNUP, kept.text).token == page.token
    script = page.submit(grace, json=True)
    assert (script.status_code, script.json["reason"]) == (429, "too_many")
    assert script.json["form_token"] == page.token
    app.config["SUBMIT_ONCE_MAX_FORMS_PER_SESSION"] = 0
    changed = forms.page(SIGNUP, kept.text).submit(grace, headers=HTMX)
    assert changed.status_code == 409 and 'value="grace@example.com"' in changed.text
    assert forms.page(SIGNUP, changed.text).submit(grace).status_code == 303
    assert signups() == ["ada@example.com", "grace@example.com"]


def test_a_typo_at_the_cap_gets_its_form_with_the_input_and_the_same_token(make_app, stopped_clock):
    """The page drawn again has two other forms, whose tokens the cap refuses: they say
    so, and the form with the typo is answered as ever (422)."""
    stopped_clock(0)
    forms = OnceForms(make_app(**AT_THE_CAP).test_client())
    page = forms.open(SIGNUP)
    typo = page.submit({**ADA, "email": "ada@"})
    assert typo.status_code == 422 and 'value="ada@"' in typo.text
    assert forms.page(SIGNUP, typo.text).token == page.token
    assert forms.page(SIGNUP, typo.text, form=1).token is None and "reload the page" in typo.text
