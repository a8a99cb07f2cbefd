"""POST /webhooks/payments: signed, deduplicated, applied through the state machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import ORDER, new_api_key, place, problem_type
from tests.support.live import LiveServer
from webapp.webhooks.signatures import HEADER, sign

SECRET = "whsec-test"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(make_app):
    return make_app(PAYMENT_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def reference(client, servers) -> str:
    """The payment reference of an API order (total 3600 cents): what the shop gave
    the provider, and what its events name the order by."""
    return place(client, new_api_key(servers)).get_json()["payment_reference"]


def reference_of(servers, link: str) -> str:
    """The payment reference of the order at ``link`` (``/orders/<key>``, or the key)."""
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT payment_reference FROM orders WHERE public_id = :key"),
            {"key": link.rsplit("/", 1)[-1]},
        )


def deliver(
    client,
    event: dict,
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    body: bytes | None = None,
    signature: str | None = None,
):
    raw = json.dumps(event).encode() if body is None else body
    header = signature if signature is not None else sign(secret, raw, timestamp=timestamp)
    return client.post(
        "/webhooks/payments", data=raw, content_type="application/json", headers={HEADER: header}
    )


def paid(
    reference: str, event_id: str = "evt_pay", amount: int = 3600, currency: str = "EUR"
) -> dict:
    return {
        "id": event_id,
        "type": "payment.succeeded",
        "order_id": reference,
        "amount_cents": amount,
        "currency": currency,
    }


def refunded(
    reference: str, event_id: str = "evt_refund", amount: int = 3600, currency: str = "EUR"
) -> dict:
    return {
        "id": event_id,
        "type": "refund.succeeded",
        "order_id": reference,
        "amount_cents": amount,
        "currency": currency,
    }


def order_row(servers):
    with servers.engine.connect() as conn:
        return conn.execute(text("SELECT status, paid_cents, refunded_cents FROM orders")).one()


def event_count(servers) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM payment_events"))


def test_a_payment_event_marks_the_order_paid(client, reference, servers):
    response = deliver(client, paid(reference))
    assert response.status_code == 200
    assert response.get_json() == {"event": "evt_pay", "result": "applied", "order_status": "paid"}
    assert tuple(order_row(servers)) == ("paid", 3600, 0) and event_count(servers) == 1


def test_a_duplicate_delivery_is_a_200_without_a_second_effect(client, reference, servers, rdb):
    deliver(client, paid(reference))
    assert deliver(client, refunded(reference)).get_json()["result"] == "applied"
    again = deliver(client, refunded(reference))
    assert again.status_code == 200 and again.get_json()["result"] == "duplicate"
    # Redis forgot: the UNIQUE event id row still stops the second effect
    rdb.flushall()
    forgotten = deliver(client, refunded(reference))
    assert forgotten.status_code == 200 and forgotten.get_json()["result"] == "duplicate"
    assert tuple(order_row(servers)) == ("refunded", 3600, 3600) and event_count(servers) == 2


def test_concurrent_duplicate_deliveries_take_effect_once(app, reference, servers):
    barrier = threading.Barrier(8)
    results: list = []

    def send() -> None:
        client = app.test_client()
        barrier.wait()
        results.append(deliver(client, paid(reference)).get_json()["result"])

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == ["applied"] + ["duplicate"] * 7
    assert event_count(servers) == 1


def test_a_refund_before_the_payment_is_a_409_and_applies_once_it_can(
    client, reference, servers, rdb
):
    early = deliver(client, refunded(reference))
    assert early.status_code == 409 and problem_type(early) == "event-out-of-order"
    assert "placed cannot be refunded" in early.get_json()["detail"]
    assert early.headers["Retry-After"]
    # not recorded, not pinned
    assert event_count(servers) == 0 and rdb.keys("wh:*") == []
    deliver(client, paid(reference))
    # the provider's retry
    retried = deliver(client, refunded(reference))
    assert retried.status_code == 200 and retried.get_json()["result"] == "applied"
    assert tuple(order_row(servers)) == ("refunded", 3600, 3600)


def test_a_refund_larger_than_the_payment_is_refused(client, reference, servers):
    deliver(client, paid(reference))
    response = deliver(client, refunded(reference, amount=3601))
    assert response.status_code == 422 and "amount_cents" in response.get_json()["errors"]
    assert tuple(order_row(servers)) == ("paid", 3600, 0) and event_count(servers) == 1


@pytest.mark.parametrize(
    "tamper",
    [
        "wrong secret",
        "body changed",
        "no header",
        "garbage",
        "too old",
        "from the future",
        "timestamp changed",
    ],
)
def test_a_bad_signature_is_a_400_and_nothing_is_recorded(
    client, reference, servers, rdb, tamper, stopped_clock
):
    """The clock is stopped: a delivery signed 301 s ahead, read in the next second,
    would be 300 s ahead, inside the tolerance."""
    stopped_clock(0)
    event = paid(reference)
    raw = json.dumps(event).encode()
    now = int(time.time())
    kwargs = {
        "wrong secret": {"secret": "not-the-secret"},
        "body changed": {"body": raw.replace(b"3600", b"1"), "signature": sign(SECRET, raw)},
        "no header": {"signature": ""},
        "garbage": {"signature": "t=abc,v1=zz"},
        "too old": {"timestamp": now - 301},
        "from the future": {"timestamp": now + 301},
        "timestamp changed": {
            "signature": sign(SECRET, raw, timestamp=now - 10).replace(f"t={now - 10}", f"t={now}")
        },
    }[tamper]
    response = deliver(client, event, **kwargs)
    assert response.status_code == 400 and problem_type(response) == "bad-signature"
    assert event_count(servers) == 0 and rdb.keys("wh:*") == []
    assert tuple(order_row(servers)) == ("placed", 0, 0)


def test_a_replayed_old_delivery_is_rejected(client, reference, servers):
    raw = json.dumps(paid(reference)).encode()
    # signed an hour ago
    captured = sign(SECRET, raw, timestamp=int(time.time()) - 3600)
    response = deliver(client, {}, body=raw, signature=captured)
    assert response.status_code == 400 and "tolerance" in response.get_json()["detail"]
    assert event_count(servers) == 0


@pytest.mark.parametrize(
    "event, status",
    [
        (
            {
                "id": "e",
                "type": "payment.succeeded",
                "order_id": "nope",
                "amount_cents": 1,
                "currency": "EUR",
            },
            422,
        ),
        ({"id": "e", "type": "payment.succeeded", "amount_cents": 1, "currency": "EUR"}, 422),
        (
            {
                "id": "e",
                "type": "payment.succeeded",
                "order_id": "x",
                "amount_cents": -5,
                "currency": "EUR",
            },
            422,
        ),
        (
            {
                "id": "e",
                "type": "payment.succeeded",
                "order_id": "x",
                "amount_cents": 10**12,
                "currency": "EUR",
            },
            422,
        ),
        ({"id": "e", "type": "payment.succeeded", "order_id": "x", "amount_cents": 1}, 422),
        (
            {
                "id": "e",
                "type": "payment.succeeded",
                "order_id": "x",
                "amount_cents": 1,
                "currency": "EURO",
            },
            422,
        ),
        (
            {
                "id": "e",
                "type": "payment.succeeded",
                "order_id": "x",
                "amount_cents": 1,
                "currency": "€",
            },
            422,
        ),
        ([1, 2], 400),
    ],
)
def test_malformed_events_are_refused(client, reference, servers, event, status):
    response = deliver(client, event)
    assert response.status_code == status and event_count(servers) == 0


def test_an_unknown_event_type_is_acknowledged_without_effect(client, reference, servers):
    event = {"id": "evt_x", "type": "customer.updated", "order_id": reference, "amount_cents": 1}
    response = deliver(client, event)
    assert response.status_code == 200 and response.get_json()["result"] == "ignored"
    assert event_count(servers) == 0


def test_webhooks_need_no_csrf_token_but_html_forms_still_do(client, reference):
    assert deliver(client, paid(reference)).status_code == 200
    response = client.post("/orders", data={"form_token": "x" * 43})
    assert response.status_code == 400 and response.mimetype == "text/html"


def test_without_a_webhook_secret_the_endpoint_answers_503(make_app, servers):
    app = make_app(APP_ENV="testing")
    app.config["PAYMENT_WEBHOOK_SECRET"] = None
    response = app.test_client().post("/webhooks/payments", json={})
    assert response.status_code == 503 and problem_type(response) == "unavailable"


def provider(servers, port: int, order: str, *args: str) -> subprocess.CompletedProcess:
    """scripts/provider against the live server on ``port`` and the test database."""
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/provider"),
            order,
            *args,
            "--url",
            f"http://127.0.0.1:{port}",
            "--secret",
            SECRET,
            "--database-url",
            servers.engine.url.render_as_string(hide_password=False),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def outcomes_of(run: subprocess.CompletedProcess) -> list[str]:
    assert run.returncode == 0, run.stdout + run.stderr
    return [line.split("-> ", 1)[1] for line in run.stdout.splitlines() if "-> " in line]


@pytest.fixture(scope="module")
def live(servers):
    """One gunicorn with the test's secret for the provider script's runs (started once:
    each test's orders and events are its own, the tables emptied between them)."""
    with LiveServer(servers, workers=1, threads=8, PAYMENT_WEBHOOK_SECRET=SECRET) as started:
        yield started


def test_the_provider_script_plays_duplicates_and_reordering_against_a_live_server(
    reference, servers, live
):
    outcomes = outcomes_of(provider(servers, live.port, reference, "--amount", "3600"))
    assert outcomes[0].startswith("409 event-out-of-order")
    assert (
        outcomes[1:5] == ["200 applied", "200 duplicate", "200 applied"] + ["200 duplicate"]
        and outcomes[5:9] == ["200 duplicate"] * 4
    )
    assert all(o.startswith("400 bad-signature") for o in outcomes[9:]) and len(outcomes) == 11
    assert tuple(order_row(servers)) == ("refunded", 3600, 3600) and event_count(servers) == 2


@pytest.mark.parametrize("named_by", ["number", "typed number", "key", "reference"])
def test_the_provider_script_takes_the_number_key_or_reference_and_pays_the_real_total(
    client, servers, live, named_by
):
    """Before: the key only (its help said the number on the confirmation page, which
    got a 422), and it paid 1800 cents whatever the order cost."""
    body = place(client, new_api_key(servers), {**ORDER, "quantity": 3}).get_json()
    assert body["total_cents"] == 5400
    given = {
        "number": body["order_number"],
        "typed number": f"{body['order_number'][:4].lower()}-{body['order_number'][4:]}",
        "key": body["id"],
        "reference": body["payment_reference"],
    }[named_by]
    run = provider(servers, live.port, given)
    outcomes = outcomes_of(run)
    assert f"the events name it {body['payment_reference']}" in run.stdout
    assert outcomes[1:4] == ["200 applied", "200 duplicate", "200 applied"]
    assert tuple(order_row(servers)) == ("refunded", 5400, 5400)
    with servers.engine.connect() as conn:
        assert (
            conn.scalar(
                text(
                    "SELECT count(*) FROM payment_events "
                    "WHERE problem IS NULL AND amount_cents = 5400"
                )
            )
            == 2
        )


def test_the_provider_script_pays_only_then_refunds_only_with_the_apps_own_dev_secret(
    client, servers
):
    """--pay leaves the order paid, so its page offers the customer a refund (before:
    every run paid and then refunded it all); --refund then refunds part of it. No
    --secret: the script signs with the development secret the app itself uses."""
    # placed on the form, €36.00
    order = order_path(submit(client, open_form(client)))
    with servers.engine.connect() as conn:
        number = conn.scalar(text("SELECT order_number FROM orders"))
    env = {name: value for name, value in os.environ.items() if name != "PAYMENT_WEBHOOK_SECRET"}
    database = servers.engine.url.render_as_string(hide_password=False)

    def provider_without_secret(port: int, *args: str) -> list[str]:
        return outcomes_of(
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "scripts/provider"),
                    number,
                    *args,
                    "--url",
                    f"http://127.0.0.1:{port}",
                    "--database-url",
                    database,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
        )

    # testing: the dev secret
    with LiveServer(servers, workers=1, threads=8) as live:
        paying = provider_without_secret(live.port, "--pay")
        assert paying[:2] == ["200 applied", "200 duplicate"]
        assert all(o.startswith("400 bad-signature") for o in paying[2:]) and len(paying) == 4
        assert tuple(order_row(servers)) == ("paid", 3600, 0)
        # the customer's next step
        assert 'id="request-refund"' in client.get(order).text
        refunding = provider_without_secret(live.port, "--refund", "--amount", "1000")
    assert refunding == ["200 applied"] + ["200 duplicate"] * 5
    assert tuple(order_row(servers)) == ("paid", 3600, 1000)


def test_the_provider_script_says_what_it_takes_and_refuses_an_unknown_order(servers):
    usage = subprocess.run(
        [sys.executable, str(ROOT / "scripts/provider"), "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    # as argparse wraps it
    usage = " ".join(usage.split())
    assert "number" in usage and "/orders/<key>" in usage and "payment reference" in usage
    assert "the order's total" in usage
    assert "number on the confirmation page" not in (ROOT / "scripts/provider").read_text()
    # nothing is sent: the port is not used
    missing = provider(servers, 9, "2222222222")
    assert missing.returncode == 1 and "No order has" in missing.stderr


def test_refunds_reported_by_the_provider_add_up_and_reconcile(app, client, reference, servers):
    deliver(client, paid(reference))
    first = deliver(client, refunded(reference, "evt_refund_1", amount=1000))
    # partial: still paid
    assert first.get_json()["order_status"] == "paid"
    # redelivered
    deliver(client, refunded(reference, "evt_refund_1", amount=1000))
    last = deliver(client, refunded(reference, "evt_refund_2", amount=2600))
    assert last.get_json()["order_status"] == "refunded"
    assert tuple(order_row(servers)) == ("refunded", 3600, 3600)
    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    assert result.exit_code == 0 and "MATCH" in result.output, result.output
