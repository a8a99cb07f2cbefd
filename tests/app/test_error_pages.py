"""Every status a page answers has a title and a body in the shop's
own words (not Werkzeug's), and each page offers something that works: a way back to
the order it is about, or, on 429, when to try again: one wait, Retry-After's."""

from __future__ import annotations

import re

import pytest
from werkzeug.exceptions import default_exceptions

from tests.orders.test_orders import open_form, order_path, submit
from webapp.error_pages import TITLES

# in scripts/test --quick
pytestmark = pytest.mark.quick

WERKZEUG_WORDING = {code: error.description for code, error in default_exceptions.items()}


def test_every_status_werkzeug_can_raise_has_a_title_of_ours():
    assert sorted(set(default_exceptions) - set(TITLES)) == []
    assert "Something went wrong" not in TITLES.values()


@pytest.mark.parametrize(
    ("method", "path", "status", "says"),
    [
        ("GET", "/admin", 404, "There is no page at this address."),
        ("DELETE", "/orders", 405, "This address cannot be opened that way"),
        ("PUT", "/orders/new", 405, "This address cannot be opened that way"),
    ],
)
def test_404_and_405_pages_speak_the_shops_words(client, method, path, status, says):
    """Was: Werkzeug's "The requested URL was not found on the server…"."""
    response = client.open(path, method=method)
    assert response.status_code == status
    assert says in response.text
    assert WERKZEUG_WORDING[status] not in response.text
    assert f'<h1 id="error-title">{TITLES[status]}</h1>' in response.text


def test_an_error_about_an_order_links_back_to_it(client):
    """A 409 from the cancel form of another order's page (its token is bound to its own
    order): the page's title is ours and its link goes to the order, not the order form."""
    first = order_path(submit(client, open_form(client)))
    other = order_path(submit(client, open_form(client), quantity="1"))
    html = client.get(f"{first}/cancel").text
    tokens = {
        name: re.search(rf'name="{name}"[^>]*value="([^"]+)"', html)[1]
        for name in ("csrf_token", "form_token")
    }
    response = client.post(f"{other}/cancellation", data=tokens)
    assert response.status_code == 409
    assert "Something went wrong" not in response.text
    assert f'id="back-to-order" href="{other}"' in response.text


WAITS = re.compile(r"\b(?:a|one|\d+) (?:seconds?|minutes?|hours?)\b|\bin a (?:moment|while)\b")


@pytest.mark.parametrize(
    ("limit", "second", "retry_after", "says"),
    [
        ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", 0, 3600, "60 minutes"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", 3480, 120, "2 minutes"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", 3481, 119, "119 seconds"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", 3599, 1, "1 second"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE", 0, 60, "60 seconds"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE", 58, 2, "2 seconds"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE", 59, 1, "1 second"),
    ],
)
def test_the_429_page_names_one_wait_retry_afters_and_does_not_refresh_itself(
    make_app, stopped_clock, limit, second, retry_after, says
):
    """Was: a meta refresh (axe: critical) and three waits: "wait a minute", "tries again
    in 11 seconds", Retry-After: 6. Its only button led back to the order form, which was
    the 429 again: now a "Try again" link to the same page. The clock is stopped: in a
    window's last second the page rightly says "1 second"."""
    stopped_clock(second)
    client = make_app(**{limit: 1, "SUBMIT_ONCE_TTL_SECONDS": 3600}).test_client()
    open_form(client)
    refused = client.get("/orders/new")
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == str(retry_after)
    main = refused.text.split("<main", 1)[1]
    said = " ".join(re.sub(r"<[^>]+>", " ", main).split())
    assert "http-equiv" not in refused.text
    assert WAITS.findall(said) == [says], said
    assert 'id="try-again"' in refused.text and "A form you already have open" in said
    assert 'id="try-again-link" href="/orders/new"' in refused.text
    assert "Go to the order form" not in refused.text


@pytest.mark.parametrize(
    ("fields", "heading"),
    [
        ({"email": "not an address"}, "Please fix this field to place your order"),
        (
            {"email": "x", "name": "", "quantity": "0"},
            "Please fix these 3 fields to place your order",
        ),
    ],
)
def test_the_error_summary_says_how_many_fields_to_fix(client, fields, heading):
    """Was: "Please fix these 4" (of what?)."""
    response = submit(client, open_form(client), **fields)
    assert response.status_code == 422 and heading in response.text
