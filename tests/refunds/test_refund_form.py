"""The refund form of a paid order: one refund request per token, the amount
reserved at once, nothing written to Redis by the submit, clear errors."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from dev.embedded import free_port
from tests.conftest import flashed, hidden, lose_the_commit_reply, token_keys
from tests.refunds.conftest import requests_of, wait_until
from tests.support.api_owned import hand_to_api_client
from tests.support.pauses import after_consume
from webapp.refunds.stream import DEAD_LETTERS, STREAM


@pytest.fixture
def order(servers, paid_order) -> tuple[int, str]:
    """(id, public id) of an order paid €36.00."""
    order_id = paid_order(3600)
    with servers.engine.connect() as conn:
        return order_id, conn.scalar(
            text("SELECT public_id FROM orders WHERE id = :id"), {"id": order_id}
        )


def open_refund_form(client, public_id: str) -> dict[str, str]:
    """Press "Request a refund" on the order's page: the refund page's tokens."""
    assert 'id="request-refund"' in client.get(f"/orders/{public_id}").text
    page = client.get(f"/orders/{public_id}/refund")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Up to €36.00." in html
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def refund_digest(app, client, public_id: str, token: str) -> str:
    """The digest the app keys this refund form's token by, in this client's session."""
    with app.test_request_context(), client.session_transaction() as session:
        return app.extensions["submit_once"].store.digest(
            token,
            session_id=session["_submit_once_sid"],
            form=f"refunds.create:public_id={public_id}",
        )


def refund(client, public_id: str, tokens: dict[str, str], amount: str):
    return client.post(f"/orders/{public_id}/refunds", data={**tokens, "amount": amount})


def test_submit_records_one_request_keyed_by_the_token_digest_and_reserves_it(
    client, app, servers, rdb, order
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    response = refund(client, public_id, tokens, "12.50")
    assert response.status_code == 303
    assert response.headers["Location"] == f"/orders/{public_id}"
    assert flashed(response) == ["refund_requested"]
    page = client.get(response.headers["Location"]).text
    assert "refund request was received" in page
    assert "is <strong>being applied</strong>" in page
    digest = refund_digest(app, client, public_id, tokens["form_token"])
    assert requests_of(servers, order_id) == [(digest, 1250, "requested", None)]
    assert reserved(servers, order_id) == 1250
    # the relay publishes it, after the commit
    assert rdb.xlen(STREAM) == 0


def reserved(servers, order_id: int) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT reserved_cents FROM orders WHERE id = :id"), {"id": order_id}
        )


def test_double_submit_requests_once_and_both_land_on_the_order(client, servers, order):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    # Both clicks leave with the cookie the page had; the browser shows the last answer.
    second_click = client.application.test_client()
    second_click.set_cookie("session", client.get_cookie("session").value)
    first = refund(client, public_id, tokens, "10")
    second = refund(second_click, public_id, tokens, "10")
    assert flashed(first) == ["refund_requested"] and flashed(second) == ["refund_already"]
    assert second.status_code == 303
    assert second.headers["Location"] == first.headers["Location"] == f"/orders/{public_id}"
    assert "already requested" in second_click.get(second.headers["Location"]).text
    assert len(requests_of(servers, order_id)) == 1 and reserved(servers, order_id) == 1000


def test_the_same_form_resubmitted_with_another_amount_is_told_not_merged(client, servers, order):
    """Back on the refund page, another amount typed, submitted: nothing new is
    requested, and the page says what the form already requested, keeping the new
    amount in a form with a fresh token."""
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    assert refund(client, public_id, tokens, "10.00").status_code == 303
    again = refund(client, public_id, tokens, "5.00")
    html = again.get_data(as_text=True)
    assert again.status_code == 409, html[:300]
    assert "already used to request a refund of €10.00" in html and 'value="5.00"' in html
    assert hidden(html, "form_token") != tokens["form_token"]
    assert [amount for _, amount, _, _ in requests_of(servers, order_id)] == [1000]
    # the same amount still lands on the request
    assert "refund_already" in flashed(refund(client, public_id, tokens, "10.00"))


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("", "Enter the amount to refund."),
        ("twelve", "Enter an amount like 12.50."),
        ("NaN", "Enter an amount like 12.50."),
        ("Infinity", "Enter an amount like 12.50."),
        ("-5", "Enter an amount like 12.50."),
        ("+5", "Enter an amount like 12.50."),
        # no exponent, however small
        ("1e1", "Enter an amount like 12.50."),
        ("1e999999", "Enter an amount like 12.50."),
        # underflowed to 0 cents: a 503
        ("1e-999999999", "Enter an amount like 12.50."),
        # Decimal reads it as 10
        ("1_0", "Enter an amount like 12.50."),
        # Arabic-Indic digits: 10 to Decimal
        ("١٠", "Enter an amount like 12.50."),
        ("1 0", "Enter an amount like 12.50."),
        (".", "Enter an amount like 12.50."),
        ("0", "Enter at least €0.01."),
        ("0.00", "Enter at least €0.01."),
        ("0.001", "Use at most two decimals"),
        ("1.005", "Use at most two decimals"),
        ("36.01", "You can refund at most €36.00."),
        # past any order, and past INTEGER
        ("99999999999", "You can refund at most €36.00."),
        # past int()'s digit limit too
        ("9" * 5000, "You can refund at most €36.00."),
        # €1, padded past int()'s limit
        ("0" * 5000 + "1", "Enter an amount like 12.50."),
        # nine euro digits: no amount
        ("0" * 8 + "1", "Enter an amount like 12.50."),
    ],
)
def test_bad_amount_gets_422_with_the_input_kept_and_the_same_token(
    client, servers, order, amount, message
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    response = refund(client, public_id, tokens, amount)
    assert response.status_code == 422
    html = response.text
    assert message in html and f'value="{amount}"' in html
    # not spent: still good
    assert hidden(html, "form_token") == tokens["form_token"]
    assert requests_of(servers, order_id) == []
    assert refund(client, public_id, tokens, "36").status_code == 303


def test_viewing_a_paid_order_writes_nothing_to_redis(client, rdb, order):
    assert 'id="request-refund"' in client.get(f"/orders/{order[1]}").text
    assert token_keys(rdb) == []


def test_a_cancelled_paid_order_can_still_be_refunded(client, servers, order):
    order_id, public_id = order
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET status = 'cancelled' WHERE id = :id"), {"id": order_id}
        )
    tokens = open_refund_form(client, public_id)
    assert refund(client, public_id, tokens, "36.00").status_code == 303
    assert len(requests_of(servers, order_id)) == 1


def test_shipped_then_fully_refunded_order_offers_no_refund_and_refuses_a_stale_form(
    client, servers, rdb, order
):
    """The refund page of a refunded order, and a form from a tab opened before, say
    what happened in words and link back to the order (was: 409 "Something went wrong",
    its only link to the order form)."""
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'refunded', refunded_cents = paid_cents WHERE id = :id"
            ),
            {"id": order_id},
        )
    assert 'id="request-refund"' not in client.get(f"/orders/{public_id}").text
    for response in (
        client.get(f"/orders/{public_id}/refund"),
        refund(client, public_id, tokens, "1"),
    ):
        assert response.status_code == 409
        assert "<title>This order is refunded in full" in response.text
        assert "You paid €36.00. All of it was refunded to you." in response.text
        assert "There is nothing left to refund." in response.text
        assert f'id="back-to-order" href="/orders/{public_id}"' in response.text
        assert "Something went wrong" not in response.text
    assert requests_of(servers, order_id) == []


def test_the_refund_page_of_an_unpaid_order_says_nothing_was_paid(client, servers, order):
    order_id, public_id = order
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET status = 'placed', paid_cents = 0 WHERE id = :id"),
            {"id": order_id},
        )
    page = client.get(f"/orders/{public_id}/refund")
    assert page.status_code == 409 and "<h1>Nothing to refund on this order</h1>" in page.text
    assert "Payment due: €36.00." in page.text
    assert "There is nothing to refund until the order is paid." in page.text
    assert f'href="/orders/{public_id}"' in page.text


def test_back_shows_the_refund_page_as_it_was_so_its_spent_token_lands_on_the_request(
    client, servers, order
):
    """The refund page is sent so that Back shows it from the browser's copy, spent
    token and all (was: no-store, so Back drew a fresh token and a retyped amount made
    a second refund). Resubmitting that copy lands on the request, even once the
    worker refunded the order in full."""
    order_id, public_id = order
    page = client.get(f"/orders/{public_id}/refund")
    assert page.headers["Cache-Control"] == "private, no-cache"
    assert "Cookie" not in page.headers.get("Vary", "")
    tokens = {
        "csrf_token": hidden(page.text, "csrf_token"),
        "form_token": hidden(page.text, "form_token"),
    }
    assert flashed(refund(client, public_id, tokens, "36.00")) == ["refund_requested"]
    # the notice is shown, and gone
    client.get(f"/orders/{public_id}")
    # Back, the copy, submit
    again = refund(client, public_id, tokens, "36.00")
    assert again.status_code == 303 and flashed(again) == ["refund_already"]
    # the worker applies it
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'refunded', refunded_cents = paid_cents, "
                "reserved_cents = 0 WHERE id = :id"
            ),
            {"id": order_id},
        )
    client.get(f"/orders/{public_id}")
    again = refund(client, public_id, tokens, "36.00")
    assert again.status_code == 303 and flashed(again) == ["refund_already"]
    assert again.headers["Location"] == f"/orders/{public_id}"
    assert len(requests_of(servers, order_id)) == 1


def test_with_htmx_a_refused_amount_is_swapped_in_place_and_a_request_redirects(
    client, servers, order
):
    """htmx posts the form and swaps a refused amount in place (the form alone, same
    token), so Back never meets a POST result; a request is a full page load of the
    order (HX-Redirect); an order with nothing left to refund, a reload of the page,
    which says so as a page of its own (HX-Refresh)."""
    order_id, public_id = order
    tokens, other_tab = open_refund_form(client, public_id), open_refund_form(client, public_id)
    htmx = {"HX-Request": "true"}
    bad = client.post(f"/orders/{public_id}/refunds", headers=htmx, data={**tokens, "amount": "99"})
    assert bad.status_code == 422 and "<html" not in bad.text
    assert 'id="refund-form-area"' in bad.text and "You can refund at most €36.00." in bad.text
    assert hidden(bad.text, "form_token") == tokens["form_token"]
    good = client.post(
        f"/orders/{public_id}/refunds", headers=htmx, data={**tokens, "amount": "10"}
    )
    assert good.status_code == 200 and good.headers["HX-Redirect"] == f"/orders/{public_id}"
    assert flashed(good) == ["refund_requested"]
    assert [r[1] for r in requests_of(servers, order_id)] == [1000]
    # refunded in full since: a page of its own
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE orders SET status = 'refunded', refunded_cents = paid_cents, "
                "reserved_cents = 0 WHERE id = :id"
            ),
            {"id": order_id},
        )
    whole = client.post(
        f"/orders/{public_id}/refunds", headers=htmx, data={**other_tab, "amount": "1"}
    )
    assert whole.status_code == 409 and whole.headers["HX-Refresh"] == "true"
    assert whole.text == ""


def test_with_htmx_a_lost_session_swaps_the_form_back_and_an_outage_swaps_nothing(
    client, servers, order, make_app
):
    """A lost session under htmx gets the refund form's fragment back in place (400): the
    amount kept, fresh tokens, never a whole page with its header and footer inside the
    form (before 0.10 the shop answered HX-Refresh, losing the amount). The app's own
    503 page (Redis away) is a whole page: htmx swaps nothing (HX-Reswap: none) and
    static/submit-once.js shows its words above the form, which keeps the amount."""
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    htmx = {"HX-Request": "true"}
    lost = client.post(
        f"/orders/{public_id}/refunds",
        headers=htmx,
        data={**tokens, "csrf_token": "stale", "amount": "10"},
    )
    assert lost.status_code == 400 and "HX-Refresh" not in lost.headers
    assert lost.text.lstrip().startswith('<div id="refund-form-area">')
    assert "<html" not in lost.text and 'value="10"' in lost.text
    assert "Your session had expired" in lost.text and requests_of(servers, order_id) == []
    fresh = {name: hidden(lost.text, name) for name in ("csrf_token", "form_token")}
    assert fresh["form_token"] != tokens["form_token"]
    again = client.post(
        f"/orders/{public_id}/refunds", headers=htmx, data={**fresh, "amount": "10"}
    )
    assert again.headers["HX-Redirect"] == f"/orders/{public_id}"
    assert [r[1:3] for r in requests_of(servers, order_id)] == [(1000, "requested")]
    nothing_there = make_app(
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=False
    ).test_client()
    away = nothing_there.get(f"/orders/{public_id}/refund", headers=htmx)
    assert away.status_code == 503 and away.headers["HX-Reswap"] == "none"
    assert away.headers["Retry-After"] == "5"
    assert 'id="error-title">We are briefly unavailable' in away.text


def test_an_api_clients_order_is_not_refunded_through_the_html_pages(client, servers, order):
    """Was: the link's key alone opened refunds of an API client's
    order; the HTML pages now refuse in words (403) and request nothing."""
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    hand_to_api_client(servers, order_id)
    page = client.get(f"/orders/{public_id}")
    assert 'id="request-refund"' not in page.text and 'id="through-api"' in page.text
    for response in (
        client.get(f"/orders/{public_id}/refund"),
        refund(client, public_id, tokens, "10"),
    ):
        assert response.status_code == 403
        assert "managed through our ordering API" in response.text
        assert "Nothing changed." in response.text
    assert requests_of(servers, order_id) == [] and reserved(servers, order_id) == 0


def test_refund_applied_since_the_form_was_opened_is_refused_with_input_kept(
    client, servers, rdb, order
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    # the worker applies €30 meanwhile
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET refunded_cents = 3000 WHERE id = :id"), {"id": order_id}
        )
    response = refund(client, public_id, tokens, "20")
    assert response.status_code == 422 and "at most €6.00" in response.text
    assert 'value="20"' in response.text and requests_of(servers, order_id) == []


@pytest.mark.parametrize(
    ("path", "form_token", "status"),
    [
        ("/orders/nope/refunds", "x" * 43, 404),
        ("/orders/{public_id}/refunds", "short", 400),
        ("/orders/{public_id}/refunds", None, 400),
    ],
)
def test_bad_requests_get_a_clear_4xx(client, servers, rdb, order, path, form_token, status):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    data = {"csrf_token": tokens["csrf_token"], "amount": "1"}
    if form_token is not None:
        data["form_token"] = form_token
    response = client.post(path.format(public_id=public_id), data=data)
    assert response.status_code == status and "<h1" in response.text
    assert rdb.xlen(STREAM) == 0 and rdb.xlen(DEAD_LETTERS) == 0
    assert requests_of(servers, order_id) == []


def test_refund_applied_while_the_submit_runs_is_refused_with_a_fresh_token(
    make_app, servers, rdb, order
):
    """The amount is checked again inside the transaction, after the token is spent."""
    order_id, public_id = order
    app = make_app()
    # the submit waits, its token spent, until the worker ran
    released = threading.Event()
    after_consume(app, lambda: released.wait(30))
    client = app.test_client()
    tokens = open_refund_form(client, public_id)
    token_key = app.extensions["submit_once"].store.key(
        refund_digest(app, client, public_id, tokens["form_token"])
    )
    assert rdb.exists(token_key)
    result = {}
    submit = threading.Thread(
        target=lambda: result.update(response=refund(client, public_id, tokens, "20"))
    )
    submit.start()
    wait_until(lambda: not rdb.exists(token_key), what="the token to be spent")
    # the worker applies €30 meanwhile
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET refunded_cents = 3000 WHERE id = :id"), {"id": order_id}
        )
    released.set()
    submit.join(30)
    response = result["response"]
    assert response.status_code == 409 and "more than is left to refund" in response.text
    assert 'value="20"' in response.text
    # The old token is spent: the form comes back with a fresh one.
    assert hidden(response.text, "form_token") != tokens["form_token"]
    assert "Up to €6.00." in response.text
    assert "You paid €36.00. €30.00 of it was refunded to you." in response.text
    assert requests_of(servers, order_id) == [] and reserved(servers, order_id) == 0


def test_two_pages_for_everything_left_the_second_is_refused_at_once_with_its_amount(
    client, servers, order
):
    """Two tabs, each asking for all €36.00, before any worker runs: the first is
    reserved, the second is told now (422, amount kept, token not spent)."""
    order_id, public_id = order
    first_tab = open_refund_form(client, public_id)
    second_tab = open_refund_form(client, public_id)
    assert refund(client, public_id, first_tab, "36.00").status_code == 303
    response = refund(client, public_id, second_tab, "36.00")
    assert response.status_code == 422
    assert "Nothing is left to refund: the rest is already requested" in response.text
    assert 'value="36.00"' in response.text
    assert "You paid €36.00. All of it is being refunded to you." in response.text
    assert [r[1:3] for r in requests_of(servers, order_id)] == [(3600, "requested")]
    assert reserved(servers, order_id) == 3600
    # The order page no longer offers a refund, and says what is under way.
    page = client.get(f"/orders/{public_id}").text
    assert 'id="request-refund"' not in page and "<strong>being applied</strong>" in page


def test_a_request_reserved_while_the_submit_runs_is_refused_with_the_amount_kept(
    make_app, servers, rdb, order
):
    """Both pages validated against the same €36.00; the reserving UPDATE inside
    the transaction refuses the one that comes second."""
    order_id, public_id = order
    app = make_app()
    # the submit waits, its token spent, until the other tab
    released = threading.Event()
    after_consume(app, lambda: released.wait(30))
    client = app.test_client()
    tokens = open_refund_form(client, public_id)
    token_key = app.extensions["submit_once"].store.key(
        refund_digest(app, client, public_id, tokens["form_token"])
    )
    result = {}
    submit = threading.Thread(
        target=lambda: result.update(response=refund(client, public_id, tokens, "30"))
    )
    submit.start()
    wait_until(lambda: not rdb.exists(token_key), what="the token to be spent")
    # another tab's request reserves €10 meanwhile
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET reserved_cents = 1000 WHERE id = :id"), {"id": order_id}
        )
    released.set()
    submit.join(30)
    response = result["response"]
    assert response.status_code == 409 and "more than is left to refund" in response.text
    assert 'value="30"' in response.text and "Up to €26.00." in response.text
    assert requests_of(servers, order_id) == [] and reserved(servers, order_id) == 1000


@pytest.mark.parametrize("committed", [True, False], ids=["commit-landed", "commit-lost"])
def test_a_connection_lost_at_commit_keeps_the_same_token_and_the_resubmit_settles_it(
    client, servers, rdb, monkeypatch, order, committed
):
    """A failover kills the connection while COMMIT is in flight: the request may
    exist. The page keeps the amount and the same token (a fresh one would request
    the money twice), and the resubmit lands on the request or takes it once, even
    when what is left no longer covers a second one."""
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    lose_the_commit_reply(monkeypatch, committed=committed)
    unsure = refund(client, public_id, tokens, "30")
    html = unsure.get_data(as_text=True)
    assert unsure.status_code == 503 and unsure.headers["Retry-After"] == "5"
    assert "We could not confirm your refund request" in html and 'value="30"' in html
    assert hidden(html, "form_token") == tokens["form_token"]
    assert len(requests_of(servers, order_id)) == (1 if committed else 0)
    again = refund(client, public_id, tokens, "30")
    assert again.status_code == 303
    assert again.headers["Location"] == f"/orders/{public_id}"
    assert flashed(again) == ["refund_already" if committed else "refund_requested"]
    assert [amount for _, amount, _, _ in requests_of(servers, order_id)] == [3000]
    # the token put back was spent by the resubmit
    assert token_keys(rdb) == []
