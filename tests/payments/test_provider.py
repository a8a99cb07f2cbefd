"""The dev payment provider behaves like a real one where the shop's safety depends on it:
idempotency keys, test cards, fault switches, and one state for every process on it."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.support.payments import DECLINED, PAYS, RETRY, Provider

# in scripts/test --quick
pytestmark = [pytest.mark.quick, pytest.mark.usefixtures("no_faults")]


def method(provider: Provider, number: str = PAYS) -> str:
    answer = provider.call("POST", "/v1/payment_methods", json={"card": {"number": number}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def charge(provider: Provider, key: str, pm: str, amount: int = 1200, reference: str = "pay_t"):
    return provider.call(
        "POST",
        "/v1/charges",
        headers={"Idempotency-Key": key},
        json={"amount": amount, "currency": "EUR", "payment_method": pm, "reference": reference},
    )


def test_the_same_key_and_body_answer_the_same_charge_and_another_body_is_a_422(provider):
    pm = method(provider)
    first, again = charge(provider, "k-same", pm), charge(provider, "k-same", pm)
    assert first.status_code == 201 and again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other = charge(provider, "k-same", pm, amount=1300)
    assert other.status_code == 422 and other.json()["error"]["code"] == "key_reused"
    assert [
        c["id"] for c in provider.charges(reference="pay_t") if c["idempotency_key"] == "k-same"
    ] == [first.json()["id"]]


def test_a_key_is_kept_a_day_then_forgotten(provider):
    pm = method(provider)
    first = charge(provider, "k-day", pm, reference="pay_day").json()
    provider.call("POST", "/admin/clock", json={"advance": 24 * 3600 - 60})
    assert charge(provider, "k-day", pm, reference="pay_day").json()["id"] == first["id"]
    provider.call("POST", "/admin/clock", json={"advance": 120})
    assert charge(provider, "k-day", pm, reference="pay_day").json()["id"] != first["id"]
    provider.call("POST", "/admin/clock", json={"advance": -24 * 3600 - 60})


@pytest.mark.parametrize(
    ("number", "status", "code"),
    [
        (DECLINED, 402, "card_declined"),
        ("4000000000009995", 402, "card_declined"),
        (RETRY, 503, "processing_error"),
    ],
)
def test_test_cards_decline_or_ask_for_a_retry(provider, number, status, code):
    pm = method(provider, number)
    answer = charge(provider, f"k-{number}", pm)
    assert answer.status_code == status and answer.json()["error"]["code"] == code
    repeat = charge(provider, f"k-{number}", pm)
    # A decline is answered again for its key; the transient failure passes on a retry.
    assert repeat.status_code == (402 if status == 402 else 201)


def test_a_card_number_that_fails_the_check_makes_no_payment_method(provider):
    answer = provider.call(
        "POST", "/v1/payment_methods", json={"card": {"number": "4242424242424241"}}
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_number"


def test_faults_fail_before_or_after_charging_and_drop_the_connection(provider):
    pm = method(provider)
    provider.faults(fail_before_charge=1)
    assert charge(provider, "k-before", pm, reference="pay_f1").status_code == 500
    assert provider.succeeded("pay_f1") == []
    provider.faults(fail_after_charge=1)
    assert charge(provider, "k-after", pm, reference="pay_f2").status_code == 500
    assert len(provider.succeeded("pay_f2")) == 1
    provider.faults(drop_after_charge=1)
    with socket.create_connection(("127.0.0.1", provider.port)) as raw:
        body = (
            f'{{"amount": 5, "currency": "EUR", "payment_method": "{pm}", "reference": "pay_f3"}}'
        ).encode()
        raw.sendall(
            b"POST /v1/charges HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + provider.http.headers["Authorization"].split()[1].encode()
            + b"\r\nIdempotency-Key: k-drop\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        # closed without an answer
        assert raw.recv(100) == b""
    assert len(provider.succeeded("pay_f3")) == 1
    assert charge(provider, "k-drop", pm, amount=5, reference="pay_f3").status_code == 201


def test_concurrent_requests_with_one_key_make_one_charge(provider):
    pm = method(provider)
    provider.faults(slow=0.3)
    answers = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(
                charge(provider, "k-race", pm, reference="pay_race").json()["id"]
            )
        )
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(answers)) == 1 and len(provider.succeeded("pay_race")) == 1


def test_two_provider_processes_and_a_restart_share_one_state(tmp_path):
    store = tmp_path / "shared.jsonl"
    with Provider(store) as one, Provider(store) as two:
        pm = method(one)
        first = charge(one, "k-shared", pm, reference="pay_shared").json()
        assert charge(two, "k-shared", pm, reference="pay_shared").json() == first
    with Provider(store) as again:
        assert [c["id"] for c in again.succeeded("pay_shared")] == [first["id"]]
