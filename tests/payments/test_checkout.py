"""The checkout charges the card during the submit, once, whatever the provider does:
the library's step (``then=charge``) against the dev provider, through the Flask test
client, on real PostgreSQL and Redis. Each test is a row of the step's failure table."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from html import unescape as html_unescape
from pathlib import Path

import pytest
from sqlalchemy import text

from flask_submit_once._runner import step_key
from tests.conftest import VALID, hidden
from tests.support.payments import DECLINED, PAYS, RETRY
from webapp.extensions import submit_once
from webapp.orders import FORM
from webapp.orders.forms import CARD_INVALID, CARD_MISSING, CARD_UNCHECKED
from webapp.orders.messages import CARD_DECLINED, PAYMENT_NOT_CONFIRMED
from webapp.payments.sweeper import sweep_while_running
from webapp.webhooks.signatures import HEADER, sign

WEBHOOK_SECRET = "whsec-test"

pytestmark = pytest.mark.usefixtures("no_faults")


@pytest.fixture
def app(make_app, provider):
    return make_app(
        **provider.app_config(PAYMENT_PROVIDER_TIMEOUT=2, PAYMENT_WEBHOOK_SECRET=WEBHOOK_SECRET)
    )


def unstored_token(client) -> str:
    """A token the shop made for this session and form (its MAC holds) that Redis never
    held: what an expired or spent token looks like when it is sent."""
    with client.session_transaction() as session:
        sid = session["_submit_once_sid"]
    return client.application.extensions["submit_once"].store.new_token(session_id=sid, form=FORM)


def open_form(client) -> dict[str, str]:
    page = client.get("/orders/new")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    # the card is typed on the review (tests/orders/test_checkout_review.py), sent here with it
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def submit(client, tokens: dict[str, str], card: str = PAYS, **fields: str):
    return client.post("/orders", data={**VALID, **tokens, "card": card, **fields})


def order(servers, *where: str) -> dict:
    with servers.engine.connect() as conn:
        rows = (
            conn.execute(
                text(
                    "SELECT id, status, paid_cents, unit_price_cents * quantity AS total,"
                    " charge_id, "
                    "payment_method, decline_code, submission_step, submission_digest, "
                    "payment_reference, public_id FROM orders ORDER BY id"
                )
            )
            .mappings()
            .all()
        )
    assert len(rows) == 1, rows
    return dict(rows[0])


def sweep(app) -> str:
    """The sweeper, as cron runs it: ``flask submit-once resume``."""
    result = app.test_cli_runner().invoke(args=["submit-once", "resume"])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def test_a_card_order_is_charged_once_and_lands_on_the_paid_order(client, servers, provider):
    response = submit(client, open_form(client))
    assert response.status_code == 303
    row = order(servers)
    assert row["status"] == "paid" and row["paid_cents"] == row["total"]
    assert row["submission_step"] is None and row["payment_method"].startswith("pm_")
    (charged,) = provider.succeeded(row["payment_reference"])
    assert charged["id"] == row["charge_id"] and charged["amount"] == row["total"]
    # The key is the library's, made from the submission's digest: nothing a client chose.
    assert charged["idempotency_key"] == step_key(row["submission_digest"], "charge")
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Paid" in page and "payment in progress" not in page
    # the card number is stored nowhere
    with servers.engine.connect() as conn:
        assert (
            conn.scalar(text(f"SELECT count(*) FROM orders WHERE orders::text LIKE '%{PAYS}%'"))
            == 0
        )


def test_a_double_submit_while_the_provider_is_slow_charges_once_and_both_land(
    app, servers, provider
):
    provider.faults(slow=1)
    first = app.test_client()
    tokens = open_form(first)
    second = app.test_client()
    second.set_cookie("session", first.get_cookie("session").value)
    answers: list = []
    threads = [
        threading.Thread(target=lambda c=c: answers.append(submit(c, tokens)))
        for c in (first, second)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [303, 303]
    assert len({a.headers["Location"] for a in answers}) == 1
    row = order(servers)
    assert row["status"] == "paid" and len(provider.succeeded(row["payment_reference"])) == 1


def test_a_declined_card_shows_the_form_again_with_the_input_and_a_fresh_token(
    client, servers, provider
):
    tokens = open_form(client)
    response = submit(client, tokens, card=DECLINED)
    html = response.get_data(as_text=True)
    assert response.status_code == 409 and CARD_DECLINED in html
    assert 'value="Ada Lovelace"' in html and DECLINED not in html
    # the declined card is not kept
    assert 'name="payment_method"' not in html
    fresh = hidden(html, "form_token")
    assert fresh != tokens["form_token"]
    row = order(servers)
    assert (row["status"], row["decline_code"], row["submission_step"]) == (
        "declined",
        "generic_decline",
        "refused",
    )
    assert row["charge_id"] is None and provider.succeeded(row["payment_reference"]) == []
    # the same submit again: declined again
    again = submit(client, tokens, card=DECLINED)
    assert again.status_code == 409 and CARD_DECLINED in again.get_data(as_text=True)
    assert provider.requests_for(step_key(row["submission_digest"], "charge")) == 1
    paid = submit(client, {**tokens, "form_token": fresh}, card=PAYS)
    assert paid.status_code == 303


def test_provider_failing_before_charging_leaves_the_order_to_a_resubmit(client, servers, provider):
    provider.faults(fail_before_charge=-1)
    tokens = open_form(client)
    response = submit(client, tokens)
    html = response.get_data(as_text=True)
    assert response.status_code == 503 and PAYMENT_NOT_CONFIRMED in html
    # the same token: it resumes
    assert hidden(html, "form_token") == tokens["form_token"]
    row = order(servers)
    assert (row["status"], row["submission_step"]) == ("charging", "charge")
    assert provider.succeeded(row["payment_reference"]) == []
    client_page = client.get(f"/orders/{row['public_id']}").get_data(as_text=True)
    assert "payment in progress" in client_page
    provider.faults()
    resubmit = submit(
        client,
        {**tokens, "form_token": hidden(html, "form_token")},
        card="",
        payment_method=hidden(html, "payment_method"),
    )
    assert resubmit.status_code == 303
    assert order(servers)["status"] == "paid"
    assert len(provider.succeeded(row["payment_reference"])) == 1


@pytest.mark.parametrize("fault", ["fail_after_charge", "slow"])
def test_a_charge_whose_answer_was_lost_is_recorded_by_the_sweeper_with_the_same_charge(
    app, client, servers, provider, fault
):
    """A 500 after charging on every retry, or answers slower than the timeout: the
    provider charged, the shop does not know it; the sweeper's call with the same key
    gets that charge back."""
    provider.faults(**{fault: 3 if fault == "slow" else -1})
    response = submit(client, open_form(client))
    assert response.status_code == 503
    row = order(servers)
    assert row["status"] == "charging"
    # A slow provider still answers each attempt after the shop gave up on it: wait for
    # the three (the first charged, the two retries replayed it).
    key, deadline = step_key(row["submission_digest"], "charge"), time.monotonic() + 30
    while provider.requests_for(key) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    (charged,) = provider.succeeded(row["payment_reference"])
    provider.faults()
    assert sweep(app) == "created=1"
    row = order(servers)
    assert (row["status"], row["charge_id"], row["submission_step"]) == (
        "paid",
        charged["id"],
        None,
    )
    assert len(provider.succeeded(row["payment_reference"])) == 1
    assert sweep(app) == "nothing"


@pytest.mark.parametrize(
    ("faults", "card", "requests"),
    [
        ({"drop_after_charge": 1}, PAYS, 2),
        ({"fail_after_charge": 1}, PAYS, 2),
        ({"fail_before_charge": 1}, PAYS, 2),
        ({}, RETRY, 2),
    ],
    ids=["dropped-after-charging", "500-after-charging", "500-before-charging", "retry-card"],
)
def test_one_lost_answer_is_retried_with_the_same_key_and_pays_at_once(
    client, servers, provider, faults, card, requests
):
    provider.faults(**faults)
    assert submit(client, open_form(client), card=card).status_code == 303
    row = order(servers)
    assert row["status"] == "paid" and len(provider.succeeded(row["payment_reference"])) == 1
    assert provider.requests_for(step_key(row["submission_digest"], "charge")) == requests


def test_two_sweepers_at_once_charge_a_left_order_once(app, servers, provider):
    provider.faults(fail_before_charge=-1)
    client = app.test_client()
    assert submit(client, open_form(client)).status_code == 503
    provider.faults()
    row = order(servers)
    # a sweeper (or a request) doing it right now: it holds the order's lease
    lease = "UPDATE orders SET submission_step_lease_owner = :owner, submission_step_lease_until = "
    with servers.engine.begin() as conn:
        conn.execute(text(lease + "now() + interval '1 minute'"), {"owner": "elsewhere"})
    assert sweep(app) == "still_running=1"
    assert order(servers)["status"] == "charging"
    with servers.engine.begin() as conn:
        conn.execute(text(lease + "NULL"), {"owner": None})
    counts: list[dict[str, int]] = []

    def sweeper() -> None:
        with app.app_context():
            counts.append(submit_once.resume())

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(c.get("created", 0) for c in counts) == 1, counts
    assert order(servers)["status"] == "paid"
    assert len(provider.succeeded(row["payment_reference"])) == 1


def test_the_refund_workers_sweeper_finishes_a_charge_left_to_do(app, servers, provider):
    provider.faults(fail_before_charge=-1)
    client = app.test_client()
    assert submit(client, open_form(client)).status_code == 503
    provider.faults()

    async def worker_sweeping() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(sweep_while_running(stop, 0.05, make_app=lambda: app))
        deadline = time.monotonic() + 20
        while order(servers)["status"] == "charging" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 20)

    # In a thread of its own: a browser test earlier in this process may have left an
    # event loop set on the main thread (Playwright's sync API runs one there).
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, worker_sweeping()).result()
    assert order(servers)["status"] == "paid"


def deliver(client, charge: dict) -> dict:
    event = {
        "id": f"evt_{charge['id']}",
        "type": "payment.succeeded",
        "order_id": charge["reference"],
        "amount_cents": charge["amount"],
        "currency": charge["currency"],
        "charge": charge["id"],
        "metadata": charge.get("metadata"),
    }
    body = json.dumps(event).encode()
    answer = client.post(
        "/webhooks/payments",
        data=body,
        content_type="application/json",
        headers={HEADER: sign(WEBHOOK_SECRET, body)},
    )
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()


def reconciled(app) -> str:
    result = app.test_cli_runner().invoke(args=["payments", "reconcile"])
    return result.output


def test_the_providers_event_for_a_charge_the_checkout_recorded_pays_nothing_more(
    app, client, servers, provider
):
    assert submit(client, open_form(client)).status_code == 303
    row = order(servers)
    (charged,) = provider.succeeded(row["payment_reference"])
    assert deliver(client, charged)["result"] == "applied"
    assert deliver(client, charged)["result"] == "duplicate"
    assert order(servers)["paid_cents"] == row["total"]
    assert "MATCH" in reconciled(app) and "MISMATCH" not in reconciled(app)


def test_the_providers_event_arriving_before_the_checkouts_record_pays_the_order_once(
    app, client, servers, provider
):
    provider.faults(fail_after_charge=-1)
    assert submit(client, open_form(client)).status_code == 503
    provider.faults()
    row = order(servers)
    (charged,) = provider.succeeded(row["payment_reference"])
    assert deliver(client, charged)["order_status"] == "paid"
    assert sweep(app) == "created=1"
    row = order(servers)
    assert (row["status"], row["paid_cents"], row["charge_id"]) == (
        "paid",
        row["total"],
        charged["id"],
    )
    assert "MISMATCH" not in reconciled(app)


def test_an_order_left_longer_than_the_provider_keeps_its_key_is_not_charged_again(
    app, client, servers, provider
):
    provider.faults(fail_after_charge=-1)
    assert submit(client, open_form(client)).status_code == 503
    provider.faults()
    with servers.engine.begin() as conn:
        conn.execute(
            text("UPDATE orders SET created_at = created_at - :age"), {"age": timedelta(hours=25)}
        )
    provider.call("POST", "/admin/clock", json={"advance": 25 * 3600})
    try:
        assert sweep(app) == "created=1"
    finally:
        provider.call("POST", "/admin/clock", json={"advance": -25 * 3600})
    row = order(servers)
    assert row["status"] == "paid" and len(provider.succeeded(row["payment_reference"])) == 1


@pytest.mark.parametrize(
    ("card", "error"),
    [("", CARD_MISSING), ("4242424242424241", CARD_INVALID), ("4242", "Enter the 12 to 19 digits")],
)
def test_a_card_that_cannot_be_used_is_a_field_error_and_spends_nothing(
    client, servers, card, error
):
    tokens = open_form(client)
    response = submit(client, tokens, card=card)
    html = response.get_data(as_text=True)
    assert response.status_code == 422 and error in html
    assert hidden(html, "form_token") == tokens["form_token"]
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM orders")) == 0


def test_the_provider_away_while_checking_the_card_spends_nothing(make_app, servers):
    app = make_app(
        PAYMENT_PROVIDER_URL="http://127.0.0.1:9",
        PAYMENT_PROVIDER_RETRIES=0,
        PAYMENT_PROVIDER_TIMEOUT=1,
    )
    client = app.test_client()
    response = submit(client, open_form(client))
    assert response.status_code == 422 and CARD_UNCHECKED in response.get_data(as_text=True)
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM orders")) == 0


def test_an_expired_form_comes_back_without_its_card_sent_to_the_provider(app, client, servers):
    """A form token that expired can place nothing, so its card is not checked: the form
    comes back with the input and a fresh token, the number not drawn back, and is
    placed with the number typed again."""
    checks = card_checks(app)
    tokens = open_form(client)
    expired = {**tokens, "form_token": unstored_token(client)}
    answer = submit(client, expired)
    html = answer.get_data(as_text=True)
    assert answer.status_code == 409 and 'value="Ada Lovelace"' in html
    assert PAYS not in html and 'name="payment_method"' not in html and checks == []
    fresh = {**tokens, "form_token": hidden(html, "form_token")}
    assert submit(client, fresh).status_code == 303
    assert checks == ["create_payment_method"]
    assert order(servers)["status"] == "paid"


def card_checks(app) -> list[str]:
    """The card checks ``app``'s provider client makes from now on, by method, in order."""
    client = app.extensions["payments"]
    calls: list[str] = []

    def counted(name: str):
        method = getattr(client, name)

        def call(*args, **kwargs):
            calls.append(name)
            return method(*args, **kwargs)

        return call

    for name in ("create_payment_method", "payment_method"):
        setattr(client, name, counted(name))
    return calls


def test_a_spent_token_sent_again_lands_on_its_order_with_no_card_check_from_any_instance(
    make_app, servers, provider
):
    """A token the shop issued, spent by the submit that placed the order, sent again
    (Back + submit, a retry through another worker that never saw it land) could place
    nothing: it lands on the order, or is told its details changed, and the provider is
    never asked about its card. A check used to be made each time, before the library
    looked at the token."""
    here, there = make_app(**provider.app_config()), make_app(**provider.app_config())
    checks_here, checks_there = card_checks(here), card_checks(there)
    client = here.test_client()
    tokens = open_form(client)
    placed = submit(client, tokens)
    assert placed.status_code == 303 and checks_here == ["create_payment_method"]
    other = there.test_client()
    other.set_cookie("session", client.get_cookie("session").value)
    # typed differently: not the bytes this instance saw land
    again = [
        submit(client, tokens, card="4242 4242 4242 4242"),
        submit(other, tokens),
        submit(other, tokens, card=""),
    ]
    assert [a.status_code for a in again] == [303] * 3
    assert {a.headers["Location"] for a in again} == {placed.headers["Location"]}
    changed = submit(other, tokens, quantity="3")
    assert changed.status_code == 409 and "already used for order" in changed.get_data(as_text=True)
    assert checks_here == ["create_payment_method"] and checks_there == []
    row = order(servers)
    assert row["status"] == "paid" and len(provider.succeeded(row["payment_reference"])) == 1


def test_a_resubmit_while_the_first_is_charging_waits_for_it_with_no_card_check(
    make_app, servers, provider, rdb
):
    """The first submit spent the token and is charging (slowly); the same form sent
    through another instance waits for it and lands on the paid order, its card never
    checked."""
    provider.faults(slow=1)
    here, there = make_app(**provider.app_config()), make_app(**provider.app_config())
    checks_there = card_checks(there)
    client = here.test_client()
    tokens = open_form(client)
    with client.session_transaction() as session:
        sid = session["_submit_once_sid"]
    store = here.extensions["submit_once"].store
    key = store.key(store.digest(tokens["form_token"], session_id=sid, form=FORM))
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(submit, client, tokens)
        deadline = time.monotonic() + 10
        while rdb.exists(key) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not rdb.exists(key) and not first.done()
        other = there.test_client()
        other.set_cookie("session", client.get_cookie("session").value)
        second = submit(other, tokens)
        assert first.result().status_code == 303
    assert second.status_code == 303, second.get_data(as_text=True)[:800]
    assert second.headers["Location"] == first.result().headers["Location"]
    assert checks_there == []
    row = order(servers)
    assert row["status"] == "paid" and len(provider.succeeded(row["payment_reference"])) == 1


def test_a_resubmit_that_no_longer_validates_still_finishes_the_charge(client, servers, provider):
    """The page that came back lost the card (a reload, another device): the resubmit of
    the same token is invalid now, and still lands on its order, charged once."""
    provider.faults(fail_before_charge=-1)
    tokens = open_form(client)
    assert submit(client, tokens).status_code == 503
    provider.faults()
    again = submit(client, tokens, card="")
    assert again.status_code == 303
    row = order(servers)
    assert (row["status"], row["submission_step"]) == ("paid", None)
    assert len(provider.succeeded(row["payment_reference"])) == 1


def test_a_hundred_checkouts_through_one_app_reuse_the_providers_pool(app, servers, provider):
    """10x the client's pool of 10: eight customers at once, 100 card orders, and the
    app never holds more than 10 connections to the provider, nor leaves more open."""

    def connections() -> set[str]:
        """Established connections to the provider's port, by their local address."""
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
        return {
            fields[1]
            for fields in map(str.split, lines)
            if fields[2].endswith(f":{provider.port:04X}") and fields[3] == "01"
        }

    # The pools of this module's earlier apps may still hold connections, and let them
    # go at any moment: only connections opened after this point are counted.
    earlier = connections()

    def to_provider() -> int:
        return len(connections() - earlier)

    seen: list[int] = []

    def customer(n: int) -> None:
        client = app.test_client()
        for _ in range(n):
            assert submit(client, open_form(client)).status_code == 303
            seen.append(to_provider())

    threads = [threading.Thread(target=customer, args=(n,)) for n in [13] * 4 + [12] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM orders WHERE status = 'paid'")) == 100
    assert len(seen) == 100 and 1 <= max(seen) <= 10 and to_provider() <= 10


def drawn(html: str) -> dict[str, str]:
    """Every hidden input of the page, as a browser sends them back."""
    fields = {}
    for tag in re.findall(r"<input\b[^>]*>", html):
        attributes = dict(re.findall(r'\b([\w-]+)="([^"]*)"', tag))
        if attributes.get("type") == "hidden" and "name" in attributes:
            fields[attributes["name"]] = html_unescape(attributes.get("value", ""))
    return fields


def test_a_price_raised_after_the_form_was_drawn_charges_nothing_and_shows_the_new_one(
    make_app, servers, provider
):
    """The card is charged only what the page showed: the operator raises the price
    while the shopper's form is open, even one drawn after that from the catalogue
    cache; the submit gets the form back with the new price and the reason, nothing is
    charged, and the page drawn again then places the order at the price it shows."""
    app = make_app(**provider.app_config(), CATALOGUE_CACHE_SECONDS=60)
    client = app.test_client()
    assert "€18.00 · Stoneware mug" in client.get("/orders/new").get_data(as_text=True)
    charges = len(provider.succeeded())
    cli = app.test_cli_runner().invoke(args=["products", "price", "MUG-STONE", "999.00"])
    assert cli.exit_code == 0, cli.output
    cached = client.get("/orders/new").get_data(as_text=True)
    # the cache: drawn after the change, old price
    assert "€18.00 · Stoneware mug" in cached
    refused = client.post("/orders", data={**drawn(cached), **VALID, "card": PAYS})
    html = refused.get_data(as_text=True)
    assert refused.status_code == 409, html[:800]
    assert "The price of Stoneware mug is now €999.00" in html and "nothing was charged" in html
    assert "€999.00 · Stoneware mug" in html and 'value="Ada Lovelace"' in html
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM orders")) == 0
    assert len(provider.succeeded()) == charges
    placed = client.post("/orders", data={**drawn(html), **VALID, "card": PAYS})
    assert placed.status_code == 303, placed.get_data(as_text=True)[:800]
    row = order(servers)
    assert (row["status"], row["total"], row["paid_cents"]) == ("paid", 199800, 199800)


def test_submits_with_made_up_tokens_from_one_session_ask_the_provider_a_bounded_number_of_times(
    make_app, servers, provider
):
    """Every submit used to turn its card into a provider token before the form token was
    looked at: 20 made-up tokens, 20 cards stored at the provider from the shop's own key
    (what card testing looks like). A made-up token is now refused by its MAC, and a
    token the shop made that is no longer live (expired, spent) by the library's
    ``token_is_live``, before the provider is asked. A live token stays live while its
    card is refused, so a session may have cards checked CARD_CHECKS_PER_SESSION times a
    window; past that the form comes back 429 with its input, and the provider is not
    called."""
    app = make_app(**provider.app_config(), CARD_CHECKS_PER_SESSION=5)
    checks = card_checks(app)
    client = app.test_client()
    tokens = open_form(client)
    made_up = [
        submit(client, {**tokens, "form_token": secrets.token_urlsafe(32)}) for _ in range(20)
    ]
    assert [answer.status_code for answer in made_up] == [409] * 20
    not_live = [submit(client, {**tokens, "form_token": unstored_token(client)}) for _ in range(20)]
    assert [answer.status_code for answer in not_live] == [409] * 20
    assert checks == []
    # one live token, a card the provider refuses each time
    answers = [submit(client, tokens, card="4242424242424241") for _ in range(20)]
    assert len(checks) == 5
    assert [answer.status_code for answer in answers] == [422] * 5 + [429] * 15
    html = answers[-1].get_data(as_text=True)
    assert "checked your card too many times" in html and 'value="Ada Lovelace"' in html
    assert int(answers[-1].headers["Retry-After"]) > 0
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM orders")) == 0


def test_a_card_is_not_sent_to_the_provider_while_another_field_is_wrong(client, servers, provider):
    before = provider.payment_methods()
    tokens = open_form(client)
    wrong = submit(client, tokens, name="", quantity="0")
    html = wrong.get_data(as_text=True)
    assert wrong.status_code == 422 and "Enter your name." in html
    assert provider.payment_methods() == before and PAYS not in html
    # the number typed again
    assert submit(client, tokens).status_code == 303
    assert provider.payment_methods() == before + 1


def test_another_charge_for_the_full_amount_while_charging_does_not_pass_for_the_checkouts(
    app, client, servers, provider
):
    """While the checkout's charge is still being recorded (its answer lost), the
    provider announces a different charge of the order's payment reference for its full
    amount (charged some other way: a dashboard, another system). It is money received,
    not the checkout's charge: it must not take that charge's place, or the checkout's
    own charge, recorded next, would be dropped and never reconciled."""
    provider.faults(fail_after_charge=-1)
    assert submit(client, open_form(client)).status_code == 503
    provider.faults()
    row = order(servers)
    assert row["status"] == "charging"
    (own,) = provider.succeeded(row["payment_reference"])
    other = {**own, "id": "ch_elsewhere", "metadata": None}
    # recorded, not the checkout's
    assert deliver(client, other)["order_status"] == "charging"
    assert sweep(app) == "created=1"
    row = order(servers)
    assert (row["status"], row["charge_id"], row["paid_cents"]) == ("paid", own["id"], row["total"])
    with servers.engine.connect() as conn:
        problems = list(conn.scalars(text("SELECT problem FROM payment_events ORDER BY id")))
    # listed by payments reconcile, for an operator
    assert problems == ["order_closed"]
