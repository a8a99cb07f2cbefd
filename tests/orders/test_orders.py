"""The order form end to end through the Flask test client, on real Redis and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, hidden, order_count, token_keys
from tests.support.pauses import after_consume
from webapp.orders.messages import STILL_RUNNING

# in scripts/test --quick
pytestmark = pytest.mark.quick


def open_form(client) -> dict[str, str]:
    page = client.get("/orders/new")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def submit(client, tokens: dict[str, str], **fields: str):
    return client.post("/orders", data={**VALID, **tokens, **fields})


def order_path(response) -> str:
    assert response.status_code == 303, response.get_data(as_text=True)[:500]
    return response.headers["Location"].split("?")[0]


def test_home_leads_to_the_order_form(client):
    response = client.get("/")
    assert response.status_code == 302 and response.headers["Location"] == "/orders/new"


def test_the_address_a_form_shown_again_leaves_opens_the_form(client):
    """A form shown again after a plain POST (422, 409, 503) leaves /orders in the address
    bar: opening it later, or from history, is the order form (it was a 405)."""
    response = client.get("/orders")
    assert response.status_code == 303 and response.headers["Location"] == "/orders/new"


def test_form_carries_a_single_use_token_stored_with_a_ttl(client, rdb):
    tokens = open_form(client)
    assert len(tokens["form_token"]) == 43
    (key,) = token_keys(rdb)
    assert 3500 < rdb.ttl(key) <= 3600


def test_submit_places_one_order_and_lands_on_its_confirmation(client, servers):
    response = submit(client, open_form(client))
    path = order_path(response)
    # no notice
    assert response.headers["Location"] == path and flashed(response) == []
    page = client.get(path).get_data(as_text=True)
    assert "your order is placed" in page and "Ada Lovelace" in page
    assert "already placed" not in page
    assert order_count(servers) == 1
    with servers.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT status, quantity, unit_price_cents, public_id, "
                "submission_digest FROM orders"
            )
        ).one()
    assert row.status == "placed" and row.quantity == 2 and row.unit_price_cents == 1800
    assert path == f"/orders/{row.public_id}" and len(row.public_id) == 22


def test_the_form_and_the_footer_speak_to_shoppers_not_developers(client):
    """Was: "You can press the button more than once: we place one order."
    under the button and "Every order is placed once, however many times the button is
    pressed." in every page's footer."""
    page = client.get("/orders/new").text
    assert "nothing is placed or charged until you press Place order there." in page
    # the button that places the order is the review's
    review = client.post("/orders/review", data={**VALID, **open_form(client)}).text
    assert "Your order’s page comes next: it says how to pay €36.00." in review
    for note in ("more than once", "however many times", "the button is pressed"):
        assert note not in page and note not in review


@pytest.mark.parametrize(
    "query",
    [
        "already_placed=1",
        "cancelled=1",
        "already_cancelled=1",
        "refund=requested",
        "refund=already",
    ],
)
def test_a_link_cannot_make_the_order_page_say_what_did_not_happen(client, query):
    """Notices come from the request that did the thing (flashed), never from the URL:
    anyone can send a customer a link to their own order with a query on it."""
    path = order_path(submit(client, open_form(client)))
    page = client.get(f"{path}?{query}").text
    assert "your order is placed" in page
    for notice in (
        "already placed",
        "is cancelled",
        "already cancelled",
        "refund request was received",
        "already requested",
    ):
        assert notice not in page, query


def test_double_click_creates_one_order_and_both_land_on_it(client, servers):
    tokens = open_form(client)
    first, second = submit(client, tokens), submit(client, tokens)
    assert first.headers["Location"] == second.headers["Location"] == order_path(first)
    assert flashed(first) == [] and flashed(second) == ["already_placed"]
    assert "already placed" in client.get(second.headers["Location"]).get_data(as_text=True)
    # said once
    assert "already placed" not in client.get(second.headers["Location"]).text
    assert order_count(servers) == 1


def test_back_and_submit_again_five_times_still_one_order(client, servers):
    tokens = open_form(client)
    paths = {order_path(submit(client, tokens)) for _ in range(5)}
    assert len(paths) == 1 and order_count(servers) == 1


def test_two_tabs_are_two_orders(client, servers):
    tab1, tab2 = open_form(client), open_form(client)
    assert order_path(submit(client, tab2)) != order_path(submit(client, tab1, quantity="1"))
    assert order_count(servers) == 2


def test_invalid_input_comes_back_with_errors_values_and_the_same_token(client, servers):
    tokens = open_form(client)
    response = submit(client, tokens, email="not-an-email", quantity="0")
    html = response.get_data(as_text=True)
    assert response.status_code == 422
    assert "Enter an email address like name@example.com." in html
    assert "Choose a quantity from 1 to 99." in html
    assert 'value="not-an-email"' in html and "Ada Lovelace" in html
    assert hidden(html, "form_token") == tokens["form_token"]
    assert order_count(servers) == 0
    # fixed: the same token still places the order
    order_path(submit(client, tokens))
    assert order_count(servers) == 1


def test_expired_token_gives_the_form_back_with_input_and_a_fresh_token(client, servers, rdb):
    tokens = open_form(client)
    # as if the TTL ran out
    rdb.flushall()
    response = submit(client, tokens, name="Grace Hopper")
    html = response.get_data(as_text=True)
    assert response.status_code == 409
    assert "This form expired" in html and 'value="Grace Hopper"' in html
    fresh = hidden(html, "form_token")
    assert fresh != tokens["form_token"] and order_count(servers) == 0
    order_path(submit(client, {**tokens, "form_token": fresh}))
    assert order_count(servers) == 1


def test_token_pasted_into_another_session_is_refused_and_stays_valid(app, client, servers):
    tokens = open_form(client)
    stranger = app.test_client()
    stolen = {**open_form(stranger), "form_token": tokens["form_token"]}
    assert submit(stranger, stolen).status_code == 409
    assert order_count(servers) == 0
    order_path(submit(client, tokens))
    assert order_count(servers) == 1


@pytest.mark.parametrize("bad", [None, "", "short", "a" * 44, "a" * 42 + "!"])
def test_missing_or_malformed_form_token_is_a_400_and_touches_nothing(client, rdb, bad):
    tokens = open_form(client)
    keys_before = token_keys(rdb)
    data = {**VALID, "csrf_token": tokens["csrf_token"]}
    if bad is not None:
        data["form_token"] = bad
    response = client.post("/orders", data=data)
    assert response.status_code == 400
    assert "without a valid form token" in response.get_data(as_text=True)
    assert token_keys(rdb) == keys_before
    order_path(submit(client, tokens))


def test_failure_after_consume_places_nothing_and_offers_a_fresh_token(make_app, servers):
    app = make_app()

    def product_goes_off_sale():
        with servers.engine.begin() as conn:
            conn.execute(text("UPDATE products SET active = false WHERE id = 1"))

    after_consume(app, product_goes_off_sale)
    client = app.test_client()
    tokens = open_form(client)
    response = submit(client, tokens, product="1")
    html = response.get_data(as_text=True)
    assert response.status_code == 409
    assert "Your order was not placed and nothing was charged" in html
    assert 'value="Ada Lovelace"' in html
    fresh = hidden(html, "form_token")
    assert fresh != tokens["form_token"] and order_count(servers) == 0
    after_consume(app, None)
    order_path(submit(client, {**tokens, "form_token": fresh}, product="2"))
    assert order_count(servers) == 1


def test_duplicate_in_flight_waits_for_the_first_and_lands_on_its_order(make_app, servers):
    app = make_app()
    consumed, release = threading.Event(), threading.Event()

    def hold():
        consumed.set()
        release.wait(5)

    after_consume(app, hold)
    first_client = app.test_client()
    tokens = open_form(first_client)
    second_client = app.test_client()
    second_client.set_cookie("session", first_client.get_cookie("session").value)
    results = {}
    first = threading.Thread(target=lambda: results.update(first=submit(first_client, tokens)))
    first.start()
    assert consumed.wait(5)
    second = threading.Thread(target=lambda: results.update(second=submit(second_client, tokens)))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "the duplicate should wait while the first is in flight"
    release.set()
    first.join(5)
    second.join(5)
    assert order_path(results["first"]) == order_path(results["second"])
    assert flashed(results["second"]) == ["already_placed"]
    assert order_count(servers) == 1


def test_duplicate_waits_only_up_to_the_bound_then_gets_the_form_back_to_submit_again(
    make_app, servers
):
    """Past the wait bound the duplicate gets the form again (503), its input and its
    token kept, saying the first submit is still being placed; submitting that same
    token again lands on the one order."""
    app = make_app(SUBMIT_ONCE_WAIT_SECONDS=0.3)
    consumed, release = threading.Event(), threading.Event()
    after_consume(app, lambda: (consumed.set(), release.wait(5)))
    client = app.test_client()
    tokens = open_form(client)
    first = threading.Thread(target=lambda: submit(client, tokens))
    first.start()
    try:
        assert consumed.wait(5)
        other = app.test_client()
        other.set_cookie("session", client.get_cookie("session").value)
        response = submit(other, tokens)
        assert response.status_code == 503 and response.headers["Retry-After"] == "2"
        html = response.get_data(as_text=True)
        assert STILL_RUNNING in html and 'value="Ada Lovelace"' in html
        assert hidden(html, "form_token") == tokens["form_token"]
    finally:
        release.set()
        first.join(5)
    # Reloading (re-POSTing the same token) now lands on the one order.
    assert flashed(submit(other, tokens)) == ["already_placed"]
    assert order_count(servers) == 1


def test_resurrected_token_is_stopped_by_the_unique_constraint(client, servers, rdb):
    tokens = open_form(client)
    (key,) = token_keys(rdb)
    path = order_path(submit(client, tokens))
    # a replica promoted before it saw the GETDEL
    rdb.set(key, 1, ex=60)
    again = submit(client, tokens)
    assert order_path(again) == path and flashed(again) == ["already_placed"]
    assert order_count(servers) == 1


def test_lost_session_cookie_gives_the_form_back_with_input(client, servers):
    tokens = open_form(client)
    client.delete_cookie("session")
    response = submit(client, tokens, name="Katherine Johnson")
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "Your session expired" in html and 'value="Katherine Johnson"' in html
    assert order_count(servers) == 0


def test_confirmation_of_unknown_order_is_a_404_page(client):
    response = client.get("/orders/AAAAAAAAAAAAAAAAAAAAAA")
    assert response.status_code == 404
    assert "There is no order at this link" in response.get_data(as_text=True)


def test_pages_carry_strict_security_headers(client):
    headers = client.get("/orders/new").headers
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    # Back may show the form again from cache, never anything else (submit_once.history).
    assert headers["Cache-Control"] == "private, no-cache" and "Vary" not in headers
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
