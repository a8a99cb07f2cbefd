"""A validator that calls elsewhere (a card checked at a provider) asks
``submit_once.token_is_live()`` first: a submit whose token is spent or expired could
take no effect, so it is answered as the repeat it is, and nothing is asked elsewhere.
The checkout's ``validate_card`` (checkout_app.py) asks it; the provider counts checks."""

from __future__ import annotations

import threading

import pytest

from flask_submit_once.testing import OnceForms

CARD = {"email": "ada@example.com", "cents": "1250", "card": "4242424242424242"}


@pytest.fixture
def app(make_checkout):
    return make_checkout()


@pytest.fixture
def client(app):
    return app.test_client()


def another_worker(make_checkout, once_forms, **config):
    """The same browser, answered by another process of the app (nothing remembered)."""
    client = make_checkout(**config).test_client()
    client.set_cookie("session", once_forms.client.get_cookie("session").value)
    return client


@pytest.mark.parametrize("worker", ["same", "another"])
def test_a_spent_token_sent_again_lands_on_its_order_and_its_card_is_not_checked_again(
    make_checkout, once_forms, provider, orders, worker
):
    page = once_forms.open("/checkout")
    assert page.submit(CARD).headers["Location"] == "/orders/1"
    client = another_worker(make_checkout, once_forms) if worker == "another" else None
    # the same amount typed another way: not the bytes this process saw land
    again = page.submit({**CARD, "cents": "01250"}, client=client)
    assert (again.status_code, again.headers["Location"]) == (303, "/orders/1")
    changed = page.submit({**CARD, "cents": "990"}, client=client)
    assert changed.status_code == 409 and "already used, with other details" in changed.text
    assert sum(provider.checks.values()) == 1 and list(provider.calls.values()) == [1]
    assert orders() == [("ada@example.com", "ch_1", None)]


def test_a_resubmit_while_the_first_is_charging_waits_for_it_and_checks_no_card(
    make_checkout, once_forms, provider, orders
):
    page = once_forms.open("/checkout")
    provider.hold()
    answers: list = []
    first = threading.Thread(target=lambda: answers.append(page.submit(CARD)))
    first.start()
    assert provider.entered.wait(10)
    # the first submit holds the charge: its token is spent, its row not yet charged
    other = another_worker(make_checkout, once_forms)
    second = threading.Thread(target=lambda: answers.append(page.submit(CARD, client=other)))
    second.start()
    second.join(0.3)
    assert second.is_alive()
    provider.release()
    first.join(10)
    second.join(10)
    assert [(a.status_code, a.headers["Location"]) for a in answers] == [(303, "/orders/1")] * 2
    assert sum(provider.checks.values()) == 1 and list(provider.calls.values()) == [1]
    assert orders() == [("ada@example.com", "ch_1", None)]


def test_an_expired_token_comes_back_with_a_fresh_one_and_no_card_checked(
    once_forms, provider, rdb, orders
):
    page = once_forms.open("/checkout")
    rdb.flushall()
    expired = page.submit(CARD)
    assert expired.status_code == 409 and 'value="ada@example.com"' in expired.text
    assert not provider.checks and orders() == []
    fresh = once_forms.page("/checkout", expired.text)
    assert fresh.token not in (None, page.token)
    assert fresh.submit(CARD).status_code == 303
    assert sum(provider.checks.values()) == 1


def test_a_live_token_is_checked_kept_when_invalid_and_a_form_that_never_asks_is_unchanged(
    once_forms, provider, orders
):
    page = once_forms.open("/checkout")
    invalid = page.submit({**CARD, "cents": "0"})
    assert invalid.status_code == 422 and sum(provider.checks.values()) == 1
    assert once_forms.page("/checkout", invalid.text).token == page.token
    # no card: nothing asks whether the token is live
    assert page.submit({**CARD, "card": ""}).status_code == 303
    assert sum(provider.checks.values()) == 1
    assert orders() == [("ada@example.com", "ch_1", None)]


def test_redis_away_while_the_card_would_be_checked_is_a_503_with_the_input_and_no_check(
    make_checkout, provider, own_redis, orders
):
    once_forms = OnceForms(make_checkout(REDIS_URL=own_redis.url).test_client())
    page = once_forms.open("/checkout")
    own_redis.stop()
    away = page.submit(CARD)
    assert away.status_code == 503 and 'value="ada@example.com"' in away.text
    assert not provider.checks and orders() == []


def test_asking_outside_a_protected_submit_says_where_to_ask(app):
    from checkout_app import submit_once

    with app.test_request_context("/checkout/pay", method="POST"):
        with pytest.raises(RuntimeError, match="validators"):
            submit_once.token_is_live()
