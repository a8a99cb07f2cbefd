"""Back + edit of a placed order offers "Update order N with these
details" beside "Place another order" and "See order N", while the order can change.
The update is once-only (its own form token), re-reads the product inside its
transaction, and is refused in words (409, nothing changed, input kept) once the order
is paid, cancelled or charged to a card."""

from __future__ import annotations

import secrets
import threading

import pytest
from sqlalchemy import text

from tests.conftest import VALID, flashed, hidden, order_count
from tests.faults.steps import open_form, submit
from tests.support.order_buttons import buttons, landed, press
from tests.support.pauses import after_consume

EDITED = {**VALID, "quantity": "5", "address": "1 Other Street\nLeeds LS1 1AA"}


def changed_page(client) -> tuple[str, str]:
    """Place VALID, then send the same rendering with EDITED (Back + edit): the order's
    path and the 409 page."""
    tokens = open_form(client)
    path = landed(submit(client, tokens))
    again = submit(client, tokens, **EDITED)
    assert again.status_code == 409
    return path, again.get_data(as_text=True)


def order_row(servers) -> dict:
    with servers.engine.connect() as conn:
        return dict(
            conn.execute(
                text(
                    "SELECT quantity, shipping_address, unit_price_cents, product_id, status "
                    "FROM orders"
                )
            )
            .mappings()
            .one()
        )


def amendments(servers) -> list[dict]:
    with servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT changes FROM order_amendments ORDER BY id")))


def number(servers) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT order_number FROM orders"))


def set_order(servers, sql: str) -> None:
    with servers.engine.begin() as conn:
        conn.execute(text(f"UPDATE orders SET {sql}"))


def test_back_edit_offers_update_beside_place_another_and_the_update_changes_the_order(
    client, servers
):
    path, html = changed_page(client)
    offered = buttons(html)
    assert offered["update-order"].label == f"Update order {number(servers)} with these details"
    assert offered["place-another"].label == "Place another order"
    assert f'href="{path}" id="placed-order-link">See order {number(servers)}<' in html
    # the typed input kept
    assert "1 Other Street" in html and 'value="5"' in html
    updated = press(client, html, "update-order", **EDITED)
    assert landed(updated) == path and flashed(updated) == ["amended"]
    assert order_row(servers)["quantity"] == 5
    assert order_row(servers)["shipping_address"] == EDITED["address"]
    assert order_count(servers) == 1
    assert amendments(servers) == [
        {"quantity": [2, 5], "shipping_address": [VALID["address"], EDITED["address"]]}
    ]
    page = client.get(path).get_data(as_text=True)
    assert "We updated your order with your new details." in page and "€90.00" in page


def test_a_double_click_on_update_updates_once_and_both_land_on_the_order(client, servers):
    path, html = changed_page(client)
    first = press(client, html, "update-order", **EDITED)
    second = press(client, html, "update-order", **EDITED)
    assert landed(first) == landed(second) == path
    # the page says "updated"
    assert flashed(second) == ["amended", "amended_already"]
    assert len(amendments(servers)) == 1 and order_count(servers) == 1


def test_update_clicks_at_once_update_once(make_app, servers):
    app = make_app()
    client = app.test_client()
    path, html = changed_page(client)
    answers: list = []
    start = threading.Barrier(4)

    def click() -> None:
        other = app.test_client()
        other.set_cookie("session", client.get_cookie("session").value)
        start.wait()
        answers.append(press(other, html, "update-order", **EDITED))

    threads = [threading.Thread(target=click) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert [landed(answer) for answer in answers] == [path] * 4
    assert len(amendments(servers)) == 1 and order_row(servers)["quantity"] == 5


@pytest.mark.parametrize(
    ("meanwhile", "why"),
    [
        ("status = 'paid', paid_cents = 3600", "it is paid"),
        ("status = 'cancelled'", "it is cancelled"),
    ],
)
def test_an_update_of_an_order_paid_or_cancelled_meanwhile_is_refused_in_words(
    client, servers, meanwhile, why
):
    path, html = changed_page(client)
    set_order(servers, meanwhile)
    refused = press(client, html, "update-order", **EDITED)
    page = refused.get_data(as_text=True)
    assert refused.status_code == 409, page[:500]
    assert f"Order {number(servers)} was not changed: {why}." in page
    assert "1 Other Street" in page and 'value="5"' in page
    # no Update any more: the plain form, to place another
    assert list(buttons(page)) == []
    assert "Place another order" in page and f'href="{path}"' in page
    assert order_row(servers)["quantity"] == 2 and amendments(servers) == []


def set_price(servers, cents: int, product: int = 1) -> None:
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE products SET price_cents = :cents WHERE id = :id"),
            {"cents": cents, "id": product},
        )


def test_an_update_keeps_the_price_the_order_was_placed_at_unless_todays_is_taken(client, servers):
    """An address fixed after a price rise must not re-price the order: it keeps what it
    was placed at. Today's price is taken only when the shopper ticks it, and only the
    one their page showed; another product is charged the price its page showed."""
    # placed at €18.00
    path, html = changed_page(client)
    set_price(servers, 1900)
    landed(press(client, html, "update-order", **EDITED))
    assert order_row(servers)["unit_price_cents"] == 1800
    page = press(client, html, "update-order", **{**EDITED, "quantity": "6"}).get_data(
        as_text=True
        # the same form again with other details: Update offered again, drawn now
    )
    assert "Use today’s price, €19.00 each, instead of the €18.00" in page
    # and again, while that page is open
    set_price(servers, 2000)
    taken = {
        **EDITED,
        "quantity": "6",
        "new_price": "y",
        "shown_prices": hidden(page, "shown_prices"),
    }
    refused = press(client, page, "update-order", **taken)
    again = refused.get_data(as_text=True)
    assert refused.status_code == 409
    assert "the price of Stoneware mug is now €20.00 (the page showed €19.00)" in again
    assert "€20.00 · Stoneware mug" in again
    assert order_row(servers)["unit_price_cents"] == 1800
    taken["shown_prices"] = hidden(again, "shown_prices")
    landed(press(client, again, "update-order", **taken))
    assert (order_row(servers)["unit_price_cents"], order_row(servers)["quantity"]) == (2000, 6)
    other = {**EDITED, "product": "2", "shown_prices": hidden(again, "shown_prices")}
    # the tea's €12.50 was shown
    set_price(servers, 1300, product=2)
    refused = press(client, again, "update-order", **other)
    assert refused.status_code == 409 and order_row(servers)["product_id"] == 1
    assert path


def test_the_update_reads_the_product_again_in_its_transaction(client, servers):
    _, html = changed_page(client)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET active = false WHERE id = 1"))
    refused = press(client, html, "update-order", **{**EDITED, "quantity": "7"})
    # off sale since the page: the form says so first
    assert refused.status_code == 422
    assert "Choose one of the products on sale." in refused.get_data(as_text=True)


def test_a_product_taken_off_sale_after_validation_is_refused_inside_the_transaction(
    make_app, servers
):
    app = make_app()
    client = app.test_client()
    _, html = changed_page(client)

    # between validation and the update's own read of it
    def off_sale() -> None:
        with servers.engine.begin() as conn:
            conn.execute(text("UPDATE products SET active = false WHERE id = 1"))

    after_consume(app, off_sale)
    refused = press(client, html, "update-order", **EDITED)
    after_consume(app, None)
    page = refused.get_data(as_text=True)
    assert refused.status_code == 409
    assert "the product you chose is no longer on sale" in page and 'value="5"' in page
    assert order_row(servers)["quantity"] == 2 and amendments(servers) == []


def test_a_card_order_is_not_offered_an_update_and_a_forged_one_is_refused(client, servers):
    tokens = open_form(client)
    path = landed(submit(client, tokens))
    set_order(servers, "status = 'paid', payment_method = 'pm_1', paid_cents = 3600")
    again = submit(client, tokens, **EDITED)
    page = again.get_data(as_text=True)
    assert again.status_code == 409
    assert f"Order {number(servers)} can no longer be changed: it is paid." in page
    assert list(buttons(page)) == [] and "Place another order" in page
    # The update form of a page drawn before the payment, sent now: refused in words.
    tokens = open_form(client)
    landed(submit(client, tokens, quantity="4"))
    html = submit(client, tokens, quantity="6").get_data(as_text=True)
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'charging', payment_method = 'pm_2' WHERE quantity = 4"
            )
        )
    refused = press(client, html, "update-order", quantity="6")
    assert refused.status_code == 409
    assert "was not changed: its card payment is under way." in refused.get_data(as_text=True)
    assert path and amendments(servers) == []


def test_an_invalid_update_comes_back_with_its_errors_and_the_same_token(client, servers):
    _, html = changed_page(client)
    token = buttons(html)["update-order"].token
    invalid = press(client, html, "update-order", **{**EDITED, "quantity": "0"})
    page = invalid.get_data(as_text=True)
    assert invalid.status_code == 422
    assert "Choose a quantity from 1 to 99." in page
    assert buttons(page)["update-order"].token == token
    landed(press(client, page, "update-order", **EDITED))
    assert order_row(servers)["quantity"] == 5


def test_update_with_the_same_details_again_after_back_lands_and_other_details_are_told(
    client, servers
):
    path, html = changed_page(client)
    landed(press(client, html, "update-order", **EDITED))
    other = press(client, html, "update-order", **{**EDITED, "quantity": "9"})
    page = other.get_data(as_text=True)
    assert other.status_code == 409
    assert "already used to update order" in page and 'value="9"' in page
    assert buttons(page)["update-order"].token != buttons(html)["update-order"].token
    landed(press(client, page, "update-order", **{**EDITED, "quantity": "9"}))
    assert order_row(servers)["quantity"] == 9 and len(amendments(servers)) == 2
    assert order_count(servers) == 1


def test_place_another_order_from_that_page_places_a_second(client, servers):
    _, html = changed_page(client)
    landed(press(client, html, "place-another", **EDITED))
    assert order_count(servers) == 2 and amendments(servers) == []


#: What someone who has only the order's link would change it to.
MALLORY = {**EDITED, "name": "Mallory", "email": "mallory@example.com", "address": "Elsewhere"}


def test_an_order_link_in_another_browser_cannot_update_the_order(make_app, servers):
    """The link opens the order's page, its cancel and its refund to whoever holds it;
    its details change only from the browser session that placed it. From another one
    an update is refused before any token is looked at (a made-up one, or the owner's
    own Update button copied), its page offers no token that could change the order."""
    app = make_app()
    owner = app.test_client()
    path, html = changed_page(owner)
    stranger = app.test_client()
    csrf = open_form(stranger)["csrf_token"]
    made_up = stranger.post(
        f"{path}/amendments",
        data={**MALLORY, "csrf_token": csrf, "form_token": secrets.token_urlsafe(32)},
    )
    page = made_up.get_data(as_text=True)
    assert made_up.status_code == 403, page[:800]
    assert "only from the browser it was placed from" in page
    assert "form_token" not in page and "update-order" not in page
    copied = stranger.post(
        f"{path}/amendments",
        data={**MALLORY, "csrf_token": csrf, "form_token": buttons(html)["update-order"].token},
    )
    assert copied.status_code == 403
    assert order_row(servers)["quantity"] == 2 and amendments(servers) == []
    # the page, as before
    assert number(servers) in stranger.get(path).get_data(as_text=True)
    # the owner still can
    landed(press(owner, html, "update-order", **EDITED))
    assert order_row(servers)["quantity"] == 5


def test_the_already_used_page_offers_update_only_to_the_session_that_placed_the_order(
    client, servers
):
    """The order form's "already used" page (409) offers "Update order N" with its token;
    a session that is not the one that placed the order (here the same form token's
    session, its shop value gone) is offered only to place another order."""
    tokens = open_form(client)
    path = landed(submit(client, tokens))
    with client.session_transaction() as session:
        del session["shopper"]
    again = submit(client, tokens, **EDITED)
    page = again.get_data(as_text=True)
    assert again.status_code == 409
    assert "it was placed from another browser" in page
    assert list(buttons(page)) == [] and "Place another order" in page
    # what the link showed before: the order
    assert f'href="{path}"' in page
