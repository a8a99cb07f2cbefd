"""Who may get a form token, and how many: the per-session and per-address caps, and
another site's page asking for forms it does not navigate to."""

from __future__ import annotations

import itertools

import pytest

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
    """Issue 30, item 11: a /48 held 65,536 budgets of a /64 each; NAT64 put every IPv4
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
            # issue 30, item 1: all were 200
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
