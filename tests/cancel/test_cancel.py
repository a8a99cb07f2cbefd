"""The "Cancel order" button: its own single-use token, the state machine behind it."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.conftest import flashed, hidden, lose_the_commit_reply, token_keys
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_owned import hand_to_api_client
from tests.support.races import cancel_racing_ship

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def order(client) -> str:
    """The confirmation page's path of a freshly placed order."""
    return order_path(submit(client, open_form(client)))


def cancel_form(client, order: str) -> dict[str, str]:
    """Press "Cancel order" on the confirmation page: the confirm page's tokens."""
    assert "Cancel order" in client.get(order).get_data(as_text=True)
    html = client.get(f"{order}/cancel").get_data(as_text=True)
    assert "Cancel this order?" in html
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def set_status(servers, status: str) -> None:
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = :s, paid_cents = 3600"), {"s": status})


def status(servers) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT status FROM orders"))


def test_viewing_an_order_writes_nothing_to_redis(client, order, rdb):
    client.get(order)
    assert token_keys(rdb) == []


def test_cancel_button_cancels_the_order(client, order, servers, rdb):
    tokens = cancel_form(client, order)
    # the order form's token was spent: this is the cancel form's
    (key,) = token_keys(rdb)
    assert 0 < rdb.ttl(key) <= 3600
    response = client.post(f"{order}/cancel", data=tokens)
    # consumed by the cancel
    assert token_keys(rdb) == []
    assert response.status_code == 303 and response.headers["Location"] == order
    assert flashed(response) == ["cancelled"]
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Your order is cancelled" in page and "Cancelled" in page
    # nothing left to cancel
    assert "Cancel order" not in page
    assert status(servers) == "cancelled"


def test_double_click_on_cancel_is_one_cancel_and_both_land_on_the_order(client, order):
    tokens = cancel_form(client, order)
    # Both clicks leave with the cookie the page had; the browser shows the last answer.
    second_click = client.application.test_client()
    second_click.set_cookie("session", client.get_cookie("session").value)
    first = client.post(f"{order}/cancel", data=tokens)
    second = second_click.post(f"{order}/cancel", data=tokens)
    assert flashed(first) == ["cancelled"]
    assert second.status_code == 303 and second.headers["Location"] == order
    assert flashed(second) == ["already_cancelled"]
    assert "already cancelled" in second_click.get(order).get_data(as_text=True)


def test_cancel_from_two_tabs_is_still_cancelled(client, order, servers):
    tab1, tab2 = cancel_form(client, order), cancel_form(client, order)
    assert flashed(client.post(f"{order}/cancel", data=tab1)) == ["cancelled"]
    # the notice is shown, and gone
    client.get(order)
    again = client.post(f"{order}/cancel", data=tab2)
    assert again.headers["Location"] == order and flashed(again) == ["already_cancelled"]
    assert status(servers) == "cancelled"


def test_a_paid_order_can_be_cancelled(client, order, servers):
    set_status(servers, "paid")
    client.post(f"{order}/cancel", data=cancel_form(client, order))
    assert status(servers) == "cancelled"


def test_cancelling_a_shipped_order_is_a_409_page_saying_why(client, order, servers):
    tokens = cancel_form(client, order)
    # shipped while the page was open
    set_status(servers, "shipped")
    sent = client.post(f"{order}/cancel", data=tokens)
    # To the cancel page, which says why: a GET, so Back to it never resubmits.
    assert sent.status_code == 303 and sent.headers["Location"] == f"{order}/cancel"
    response = client.get(sent.headers["Location"])
    assert response.status_code == 409
    assert "An order that is shipped cannot be cancelled." in response.get_data(as_text=True)
    assert status(servers) == "shipped"
    assert "Cancel order" not in client.get(order).get_data(as_text=True)
    # a stale link says why, issues no token
    refused = client.get(f"{order}/cancel")
    assert refused.status_code == 409 and "cannot be cancelled" in refused.get_data(as_text=True)


def test_cancel_needs_the_csrf_token(client, order, servers):
    tokens = cancel_form(client, order)
    response = client.post(f"{order}/cancel", data={"form_token": tokens["form_token"]})
    assert response.status_code == 400 and status(servers) == "placed"


def test_cancel_with_a_malformed_token_is_a_400_and_an_unknown_order_a_404(client, order):
    tokens = cancel_form(client, order)
    assert client.post(f"{order}/cancel", data={**tokens, "form_token": "x"}).status_code == 400
    assert client.post("/orders/AAAAAAAAAAAAAAAAAAAAAA/cancel", data=tokens).status_code == 404


def test_a_cancel_token_only_cancels_its_own_order(client, order, servers):
    other = order_path(submit(client, open_form(client), quantity="1"))
    tokens = cancel_form(client, order)
    # bound to the first order's form
    response = client.post(f"{other}/cancel", data=tokens)
    assert response.status_code == 409
    with servers.engine.connect() as conn:
        assert set(conn.scalars(text("SELECT status FROM orders"))) == {"placed"}


def test_concurrent_cancel_and_ship_exactly_one_wins_and_the_loser_is_told_why(
    app, client, order, servers
):
    set_status(servers, "paid")
    tokens = cancel_form(client, order)
    with servers.engine.connect() as conn:
        order_id = conn.scalar(text("SELECT id FROM orders"))
    page, shipped = cancel_racing_ship(
        servers.engine, order_id, lambda: client.post(f"{order}/cancel", data=tokens)
    )
    if status(servers) == "cancelled":
        assert page.status_code == 303
        assert str(shipped) == "An order that is cancelled cannot be shipped."
    else:
        assert status(servers) == "shipped" and page.status_code == 303
        told = client.get(page.headers["Location"])
        assert "An order that is shipped cannot be cancelled." in told.get_data(as_text=True)


@pytest.mark.parametrize("committed", [True, False], ids=["commit-landed", "commit-lost"])
def test_a_cancel_whose_commit_lost_its_answer_never_says_nothing_changed(
    client, order, servers, monkeypatch, committed
):
    """A failover during the cancel's COMMIT: the page says it could not confirm and
    sends the customer to the order, whose status settles it; cancelling again from
    there is one cancel, never a dead end."""
    tokens = cancel_form(client, order)
    lose_the_commit_reply(monkeypatch, committed=committed)
    unsure = client.post(f"{order}/cancel", data=tokens)
    html = unsure.get_data(as_text=True)
    assert unsure.status_code == 503
    assert "could not confirm the cancel" in html and "nothing changed" not in html
    assert status(servers) == ("cancelled" if committed else "placed")
    page = client.get(order).get_data(as_text=True)
    assert ("Cancel order" in page) is not committed
    if not committed:
        again = client.post(f"{order}/cancel", data=cancel_form(client, order))
        assert again.status_code == 303 and flashed(again) == ["cancelled"]
        assert status(servers) == "cancelled"


def test_back_shows_the_cancel_page_as_it_was_and_its_spent_token_lands_on_the_order(
    client, order, servers
):
    """The cancel page is sent so that Back shows the browser's copy (private, no-cache,
    no Vary: Cookie) and posts to another URL than its own, which a POST would drop from
    the cache (was: no-store, posting to its own URL, so Back fetched it again: a 409
    "This order was not cancelled"). The copy's spent token lands on the order."""
    page = client.get(f"{order}/cancel")
    assert page.headers["Cache-Control"] == "private, no-cache"
    assert "Cookie" not in page.headers.get("Vary", "")
    assert f'action="{order}/cancellation"' in page.text
    tokens = {
        "csrf_token": hidden(page.text, "csrf_token"),
        "form_token": hidden(page.text, "form_token"),
    }
    assert flashed(client.post(f"{order}/cancellation", data=tokens)) == ["cancelled"]
    client.get(order)
    # Back, the copy, submit
    again = client.post(f"{order}/cancellation", data=tokens)
    assert again.status_code == 303 and again.headers["Location"] == order
    assert flashed(again) == ["already_cancelled"]
    assert status(servers) == "cancelled"


def test_the_cancel_page_of_a_cancelled_order_goes_to_the_order_saying_so(client, order):
    """Back when the browser kept no copy, or a reload: the order, "already cancelled"
    (was: 409 "This order was not cancelled: … cannot be cancelled")."""
    client.post(f"{order}/cancel", data=cancel_form(client, order))
    client.get(order)
    again = client.get(f"{order}/cancel")
    assert again.status_code == 303 and again.headers["Location"] == order
    assert flashed(again) == ["already_cancelled"]
    page = client.get(order).text
    assert "This order was already cancelled — nothing changed." in page
    assert "not cancelled" not in page


def test_a_cancelled_order_says_so_in_its_headline_and_notice_at_the_top(client, order):
    client.post(f"{order}/cancel", data=cancel_form(client, order))
    page = client.get(order).text
    assert "<h1 data-order-confirmed>Your order is cancelled</h1>" in page
    assert "your order is placed" not in page
    assert page.index('id="cancelled"') < page.index("<h1") < page.index('class="summary"')
    assert "Nothing was charged." in page


@pytest.mark.parametrize(
    ("paid", "reserved", "says"),
    [
        (3600, 0, ["You paid €36.00.</p>", "Press “Request a refund” below to get it back."]),
        (3600, 3600, ["You paid €36.00. All of it is being refunded to you.</p>"]),
        (
            3600,
            1000,
            [
                "You paid €36.00. €10.00 of it is being refunded to you.</p>",
                "Press “Request a refund” below to get the other €26.00 back.",
            ],
        ),
    ],
)
def test_a_paid_then_cancelled_order_says_what_happens_to_the_money(
    client, order, servers, paid, reserved, says
):
    """Was: "Nothing will be shipped or charged" on an order that was paid."""
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET status = 'cancelled', paid_cents = :p, reserved_cents = :r"),
            {"p": paid, "r": reserved},
        )
    page = client.get(order).text
    assert "Your order is cancelled" in page and all(said in page for said in says)
    assert "or charged" not in page


def test_an_api_clients_order_is_not_cancelled_through_the_html_pages(client, order, servers, rdb):
    """Was: whoever had the link's key could cancel an API client's
    order on the HTML pages. Now they refuse in words (403) and change nothing."""
    tokens = cancel_form(client, order)
    hand_to_api_client(servers)
    assert 'id="cancel-order"' not in client.get(order).text
    for response in (
        client.get(f"{order}/cancel"),
        client.post(f"{order}/cancellation", data=tokens),
        client.post(f"{order}/cancel", data=tokens),
    ):
        assert response.status_code == 403
        assert "managed through our ordering API" in response.text
        assert "POST /api/orders/&lt;id&gt;/cancel" in response.text
    assert status(servers) == "placed"
    # the cancel form's token, unspent
    assert len(token_keys(rdb)) == 1
