"""Checkout in two steps: the details, then a review of exactly what will be charged,
whose "Place order" places the order once. One token serves the whole checkout (the
details page is issued it, the review carries it), so Back, Continue again, Edit or a
storm of Place order from one review all end on one order."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from html import unescape

import pytest
from sqlalchemy import text

from tests.conftest import VALID, hidden, order_count
from tests.support.live import LiveServer, open_form, request
from tests.support.payments import PAYS

#: What the review sends on to "Place order" (and to "Edit"), as hidden fields.
CARRIED = ("csrf_token", "form_token", "product", "quantity", "name", "email", "address")


def details_page(client) -> dict[str, str]:
    """The checkout's first step: its CSRF token and the token "Place order" spends."""
    page = client.get("/orders/new")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'action="/orders/review"' in html and ">Continue<" in html
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def carried(html: str) -> dict[str, str]:
    """The fields a review page sends with "Place order", as a browser sends them."""
    return {name: unescape(hidden(html, name)) for name in (*CARRIED, "shown_prices")}


def review(client, tokens: dict[str, str], **fields: str):
    return client.post("/orders/review", data={**VALID, **tokens, **fields})


def test_details_then_review_shows_what_is_charged_and_place_makes_one_order(client, servers):
    tokens = details_page(client)
    shown = review(client, tokens)
    html = shown.get_data(as_text=True)
    assert shown.status_code == 200, html[:500]
    summary = re.search(r'<dl class="summary" id="order-review">(.*?)</dl>', html, re.S)
    assert summary is not None
    for words in ("Stoneware mug", "€18.00", "€36.00", "Ada Lovelace", "London SW1Y 4JH"):
        assert words in summary.group(1), words
    # the review carries the details page's token, and has consumed nothing
    assert hidden(html, "form_token") == tokens["form_token"]
    assert order_count(servers) == 0

    placed = client.post("/orders", data=carried(html))
    assert placed.status_code == 303, placed.get_data(as_text=True)[:500]
    with servers.engine.connect() as conn:
        row = conn.execute(
            text("SELECT quantity, unit_price_cents, shipping_address FROM orders")
        ).one()
    assert (row.quantity, row.unit_price_cents) == (2, 1800)
    assert row.shipping_address.splitlines() == VALID["address"].splitlines()


def test_review_back_review_again_and_place_twice_make_one_order(client, servers):
    tokens = details_page(client)
    first = review(client, tokens).get_data(as_text=True)
    # Back to the details as they were, Continue again: the same token is carried
    again = review(client, tokens).get_data(as_text=True)
    assert hidden(first, "form_token") == hidden(again, "form_token") == tokens["form_token"]
    placed = client.post("/orders", data=carried(again))
    # Back to the first review and Place order from it: lands on the same order
    repeat = client.post("/orders", data=carried(first))
    assert placed.status_code == repeat.status_code == 303
    assert placed.headers["Location"] == repeat.headers["Location"]
    assert order_count(servers) == 1


def test_edit_on_the_review_is_the_details_again_as_typed_with_the_same_token(client, servers):
    tokens = details_page(client)
    html = review(client, tokens).get_data(as_text=True)
    edit = client.post("/orders/details", data=carried(html))
    page = edit.get_data(as_text=True)
    assert edit.status_code == 200
    assert 'value="Ada Lovelace"' in page and "London SW1Y 4JH</textarea>" in page
    assert hidden(page, "form_token") == tokens["form_token"]
    assert 'action="/orders/review"' in page
    assert order_count(servers) == 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("email", "not an address", "Enter an email address like name@example.com."),
        ("quantity", "0", "Choose a quantity from 1 to 99."),
        ("name", "", "Enter your name."),
    ],
)
def test_a_typo_at_the_details_step_keeps_the_input_and_the_token(
    client, servers, field, value, message
):
    tokens = details_page(client)
    answer = review(client, tokens, **{field: value})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 422
    assert message in page
    assert "12 St James&#39;s Square" in page
    assert hidden(page, "form_token") == tokens["form_token"]
    assert 'action="/orders/review"' in page
    assert order_count(servers) == 0


def test_a_price_change_between_review_and_place_is_told_and_places_nothing(client, servers):
    html = review(client, details_page(client)).get_data(as_text=True)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET price_cents = 2000 WHERE id = 1"))
    answer = client.post("/orders", data=carried(html))
    page = answer.get_data(as_text=True)
    assert answer.status_code == 409
    assert "is now €20.00 (the page showed €18.00)" in page
    assert order_count(servers) == 0


def test_a_price_change_between_details_and_review_is_shown_on_the_review(client, servers):
    tokens = details_page(client)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET price_cents = 2000 WHERE id = 1"))
    html = review(client, tokens, shown_prices="1:1800").get_data(as_text=True)
    said = " ".join(html.split())
    assert "it is now €20.00 each, not €18.00" in said and "€40.00" in said
    # the review's price is the one charged
    assert client.post("/orders", data=carried(html)).status_code == 303
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT unit_price_cents FROM orders")) == 2000


def test_twenty_concurrent_places_from_one_review_make_one_order(servers):
    with LiveServer(servers, workers=2, threads=12) as live:
        cookie, form = open_form(live.port)
        shown = request(live.port, "POST", "/orders/review", cookie=cookie, form=form)
        assert shown.status == 200
        fields = carried(shown.body)
        with ThreadPoolExecutor(20) as pool:
            answers = list(
                pool.map(
                    lambda _: request(live.port, "POST", "/orders", cookie=cookie, form=fields),
                    range(20),
                )
            )
    assert [answer.status for answer in answers] == [303] * 20
    assert len({answer.headers["location"] for answer in answers}) == 1
    assert order_count(servers) == 1


def test_the_card_is_typed_on_the_review_and_never_drawn_into_a_page(make_app, provider, servers):
    client = make_app(**provider.app_config()).test_client()
    details = client.get("/orders/new").get_data(as_text=True)
    # the details step takes no card
    assert 'name="card"' not in details
    html = review(client, details_page(client)).get_data(as_text=True)
    assert re.search(r'<input id="card" name="card" type="text" value=""', html)
    placed = client.post("/orders", data={**carried(html), "card": PAYS})
    assert placed.status_code == 303
    shown = client.get(placed.headers["Location"]).get_data(as_text=True)
    assert PAYS not in shown and PAYS not in html
    assert order_count(servers) == 1
