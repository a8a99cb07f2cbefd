"""What a customer sees when a database failover leaves an order in doubt: a
confirmation link whose order is gone says so and offers the form again; a
submit whose COMMIT lost its answer keeps the same token. Neither ever places
a second order by itself."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, hidden, lose_the_commit_reply, order_count

# in scripts/test --quick
pytestmark = pytest.mark.quick


def place(client) -> tuple[dict[str, str], str]:
    page = client.get("/orders/new").get_data(as_text=True)
    form = {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }
    response = client.post("/orders", data=form)
    assert response.status_code == 303
    return form, response.location


def test_the_confirmation_link_of_a_lost_order_says_it_could_not_be_confirmed_and_offers_the_form(
    client, servers, make_app
):
    form, location = place(client)
    # the primary died before the standby had it
    with servers.engine.begin() as conn:
        conn.execute(text("DELETE FROM orders"))
    page = client.get(location)
    html = page.get_data(as_text=True)
    assert page.status_code == 404
    assert "We could not confirm this order" in html
    # the key is a secret, never shown as a number
    assert location.rsplit("/", 1)[1] not in html
    assert "lost when our systems" in html and "Nothing was charged" in html
    assert 'id="restore-offer" hidden' in html and "data-restore-details" in html
    assert 'href="/orders/new"' in html
    # The old form again, in the worker that placed it: that worker remembers the
    # order as placed, so the resubmit goes back to its link (the page above, the
    # details offered back), never to a second order placed behind the customer's back.
    again = client.post("/orders", data=form)
    assert again.status_code == 303 and again.location.startswith(location)
    assert order_count(servers) == 0
    # In any other worker the spent token is refused with the input kept and a fresh
    # token; only the customer's own submit of that places one.
    other = make_app().test_client()
    other.set_cookie("session", client.get_cookie("session").value)
    again = other.post("/orders", data=form)
    assert again.status_code == 409 and 'value="Ada Lovelace"' in again.get_data(as_text=True)
    assert order_count(servers) == 0
    fresh = hidden(again.get_data(as_text=True), "form_token")
    assert fresh != form["form_token"]
    placed = other.post("/orders", data={**form, "form_token": fresh})
    assert placed.status_code == 303 and placed.location != location
    assert other.get(placed.location).status_code == 200
    assert order_count(servers) == 1


def test_a_malformed_order_number_is_the_plain_not_found_page(client):
    page = client.get("/orders/not-an-order-id")
    html = page.get_data(as_text=True)
    assert page.status_code == 404
    assert "Check that you copied all of the link" in html
    # Said once, as the headline (its first sentence repeated it).
    assert html.count("There is no order at this link") == 1
    assert "restore-offer" not in html


def test_the_confirmation_page_marks_itself_so_the_browser_drops_its_copy(client):
    _, location = place(client)
    assert "data-order-confirmed" in client.get(location).get_data(as_text=True)


@pytest.mark.parametrize("committed", [True, False], ids=["commit-landed", "commit-lost"])
def test_a_connection_lost_at_commit_keeps_the_same_token_and_the_resubmit_settles_it(
    client, servers, monkeypatch, committed
):
    """A failover kills the connection while COMMIT is in flight: the app cannot
    know whether the order exists. The page must not say "not placed" with a
    fresh token (a resubmit would then place a second order): it keeps the same
    token, and the resubmit lands on the order or places it once."""
    page = client.get("/orders/new").get_data(as_text=True)
    form = {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }
    lose_the_commit_reply(monkeypatch, committed=committed)
    unsure = client.post("/orders", data=form)
    html = unsure.get_data(as_text=True)
    assert unsure.status_code == 503 and "We could not confirm your order" in html
    assert 'value="Ada Lovelace"' in html
    assert hidden(html, "form_token") == form["form_token"]
    assert order_count(servers) == (1 if committed else 0)
    again = client.post("/orders", data=form)
    assert again.status_code == 303
    assert ("already_placed" in flashed(again)) is committed
    assert client.get(again.location).status_code == 200
    assert order_count(servers) == 1
