"""POST /api/orders with an Idempotency-Key, through the Flask test client, on real servers."""

from __future__ import annotations

import threading
import time
from email.utils import parsedate_to_datetime

import pytest
from sqlalchemy import text

from tests.conftest import order_count, token_keys
from tests.support.api_client import ORDER, new_api_key, place, problem_type
from tests.support.pauses import after_consume
from webapp.api.openapi import openapi
from webapp.cli import CATALOGUE


@pytest.fixture
def api_key(servers) -> str:
    return new_api_key(servers)


def test_first_request_places_the_order_and_says_how_long_retries_are_safe(
    client, api_key, servers
):
    response = place(client, api_key)
    assert response.status_code == 201, response.get_data(as_text=True)
    body = response.get_json()
    assert body["status"] == "placed" and body["product"] == "MUG-STONE"
    assert body["total_cents"] == 3600
    assert response.headers["Location"] == f"/api/orders/{body['id']}"
    assert "Idempotent-Replayed" not in response.headers
    assert response.headers["Cache-Control"] == "no-store"
    expires = parsedate_to_datetime(response.headers["Idempotency-Key-Expires"]).timestamp()
    assert abs(expires - (time.time() + 24 * 3600)) < 120
    assert order_count(servers) == 1


def test_retry_with_the_same_key_and_body_replays_the_stored_response(client, api_key, servers):
    first = place(client, api_key)
    # Same object, other key order and spacing: the canonical-JSON fingerprint matches.
    retry = client.post(
        "/api/orders",
        data='{"address": "12 St James\'s Square\\nLondon",'
        ' "email":"ada@example.com","name":"Ada Lovelace","quantity":2,'
        '"product":"MUG-STONE"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": '"order-1"'},
        # structured-field form
    )
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.get_json() == first.get_json()
    assert retry.headers["Location"] == first.headers["Location"]
    assert order_count(servers) == 1


def test_replay_is_the_stored_response_even_after_the_order_changed(client, api_key):
    first = place(client, api_key)
    auth = {"Authorization": f"Bearer {api_key}"}
    assert client.post(f"{first.headers['Location']}/cancel", headers=auth).status_code == 200
    replay = place(client, api_key)
    assert replay.get_json()["status"] == "placed" and replay.get_json() == first.get_json()
    assert client.get(first.headers["Location"], headers=auth).get_json()["status"] == "cancelled"


def test_missing_idempotency_key_is_a_400(client, api_key, servers, rdb):
    response = place(client, api_key, key=None)
    assert response.status_code == 400 and problem_type(response) == "idempotency-key-missing"
    assert order_count(servers) == 0 and rdb.keys("*") == []


@pytest.mark.parametrize("value", ["", '""', "x" * 256, "schlüssel", '"unterminated', "\t"])
def test_malformed_idempotency_key_is_a_400(client, api_key, value):
    response = place(client, api_key, key=value)
    assert response.status_code == 400 and problem_type(response) == "idempotency-key-malformed"


def test_two_idempotency_key_headers_are_a_400(client, api_key):
    response = client.post(
        "/api/orders",
        json=ORDER,
        headers=[
            ("Authorization", f"Bearer {api_key}"),
            ("Idempotency-Key", "a"),
            ("Idempotency-Key", "b"),
        ],
    )
    assert response.status_code == 400 and problem_type(response) == "idempotency-key-malformed"


@pytest.mark.parametrize("authorization", [None, "Bearer sk_not-a-key", "Basic YTpi", "Bearer"])
def test_missing_or_unknown_api_key_is_a_401(client, authorization, servers):
    headers = {"Idempotency-Key": "k"} | ({"Authorization": authorization} if authorization else {})
    response = client.post("/api/orders", json=ORDER, headers=headers)
    assert response.status_code == 401 and problem_type(response) == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert order_count(servers) == 0


def test_idempotency_keys_are_scoped_to_the_client(client, api_key, servers):
    other = new_api_key(servers, "globex")
    mine, theirs = place(client, api_key), place(client, other)
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs.headers
    assert mine.get_json()["id"] != theirs.get_json()["id"] and order_count(servers) == 2
    assert (
        client.get(
            mine.headers["Location"], headers={"Authorization": f"Bearer {other}"}
        ).status_code
        == 404
    )


def test_a_second_key_of_the_same_client_sees_the_same_idempotency_keys(client, api_key, servers):
    first = place(client, api_key)
    second = place(client, new_api_key(servers, "acme"))
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.get_json() == first.get_json()


def test_same_key_with_a_different_payload_is_a_422(client, api_key, servers):
    place(client, api_key)
    response = place(client, api_key, {**ORDER, "quantity": 3})
    assert response.status_code == 422 and problem_type(response) == "idempotency-key-reused"
    assert order_count(servers) == 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("product", "NO-SUCH-SKU"),
        ("product", 1),
        ("quantity", 0),
        ("quantity", 100),
        ("quantity", "2"),
        ("quantity", True),
        ("name", ""),
        ("name", "x" * 101),
        ("email", "not-an-email"),
        ("address", "a\x00b"),
        ("extra", "field"),
    ],
)
def test_invalid_fields_are_a_422_that_does_not_pin_the_key(client, api_key, servers, field, value):
    response = place(client, api_key, {**ORDER, field: value})
    assert response.status_code == 422 and problem_type(response) == "validation-error"
    assert field in response.get_json()["errors"]
    fixed = place(client, api_key)
    assert fixed.status_code == 201 and "Idempotent-Replayed" not in fixed.headers
    assert order_count(servers) == 1


@pytest.mark.parametrize(
    "body, content_type, status, kind",
    [
        ("{not json", "application/json", 400, "malformed-json"),
        ("[" * 5000, "application/json", 400, "malformed-json"),
        ('"a string"', "application/json", 422, "validation-error"),
        ("product=1", "application/x-www-form-urlencoded", 415, "unsupported-media-type"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(
    client, api_key, body, content_type, status, kind
):
    response = client.post(
        "/api/orders",
        data=body,
        content_type=content_type,
        headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": "k"},
    )
    assert response.status_code == status and problem_type(response) == kind


def test_same_key_while_the_first_is_still_running_is_a_409_with_retry_after(make_app, servers):
    app = make_app()
    # the first holds its claim until the second is answered
    released = threading.Event()
    after_consume(app, lambda: released.wait(30))
    api_key = new_api_key(servers)
    first: list = []
    runner = threading.Thread(target=lambda: first.append(place(app.test_client(), api_key)))
    runner.start()
    client = app.test_client()
    # wait until the first holds the advisory lock
    with servers.engine.connect() as conn:
        deadline = time.monotonic() + 10
        while not conn.scalar(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    second = place(client, api_key)
    released.set()
    runner.join(15)
    assert second.status_code == 409 and problem_type(second) == "request-in-progress"
    assert int(second.headers["Retry-After"]) >= 1
    assert first[0].status_code == 201
    retry = place(client, api_key)
    assert retry.headers["Idempotent-Replayed"] == "true" and order_count(servers) == 1


def test_a_result_past_its_retention_is_not_replayed(client, api_key, servers):
    place(client, api_key)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET created_at = now() - interval '25 hours'"))
    response = place(client, api_key)
    assert response.status_code == 422 and problem_type(response) == "idempotency-key-expired"
    assert order_count(servers) == 1


def test_retention_is_configurable_and_stated_in_the_header_and_openapi(make_app, servers):
    app = make_app(IDEMPOTENCY_RETENTION=3600)
    client = app.test_client()
    response = place(client, new_api_key(servers))
    expires = parsedate_to_datetime(response.headers["Idempotency-Key-Expires"]).timestamp()
    assert abs(expires - (time.time() + 3600)) < 120
    description = client.get("/api/openapi.json").get_json()["info"]["description"]
    assert "Results are kept 1 h (3600 s)" in description


def test_redis_forgetting_a_finished_key_still_makes_no_second_order(client, api_key, servers, rdb):
    first = place(client, api_key)
    # a failover to a replica that never saw the claim
    rdb.flushall()
    retry = place(client, api_key)
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.get_json() == first.get_json() and order_count(servers) == 1


def test_a_claim_left_by_a_request_that_died_does_not_pin_the_key(client, api_key, servers, rdb):
    """A claim in Redis with no order and nobody holding its lock is a request that died
    between claim and commit: the retry takes it over and places the order (before 0.10
    it was first told 409 and the claim given back)."""
    # learn this client's claim key names
    place(client, api_key, key="warm-up")
    (claim,) = token_keys(rdb, "so:*")
    rdb.flushall()
    # a fresh key: claim it, then "die"
    dead = place(client, api_key, key="other")
    assert dead.status_code == 201
    with servers.engine.begin() as conn:
        conn.execute(text("DELETE FROM orders WHERE idempotency_key = 'other'"))
    # The claim for "other" is still in Redis but no order exists: as if the
    # worker was killed between claim and commit.
    assert len(token_keys(rdb, "so:*")) == 1 and claim not in token_keys(rdb, "so:*")
    retry = place(client, api_key, key="other")
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    again = place(client, api_key, key="other")
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == retry.get_json()
    # the warm-up's and the retry's
    assert order_count(servers) == 2


def test_a_failure_on_our_side_is_a_503_that_does_not_pin_the_key(make_app, servers):
    app = make_app()
    client, api_key = app.test_client(), new_api_key(servers)
    blocker = servers.engine.connect()
    blocker.begin()

    def lock_orders_after_the_claim() -> None:
        blocker.execute(text("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE"))

    after_consume(app, lock_orders_after_the_claim)
    try:
        # the INSERT waits for lock_timeout (5 s), then fails
        failed = place(client, api_key)
    finally:
        blocker.rollback()
        blocker.close()
    after_consume(app, None)
    assert failed.status_code == 503 and problem_type(failed) == "unavailable"
    assert failed.headers["Retry-After"]
    retry = place(client, api_key)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    assert order_count(servers) == 1


def test_api_errors_outside_the_views_are_problems_too(client):
    assert problem_type(client.get("/api/orders")) == "method-not-allowed"
    assert problem_type(client.get("/api/nothing-here")) == "not-found"
    assert problem_type(
        client.post("/api/orders", data="x" * 70_000, content_type="application/json")
    ) in ("payload-too-large", "unauthorized")


def test_html_pages_keep_their_error_pages(client):
    response = client.get("/no-such-page")
    assert response.status_code == 404 and response.mimetype == "text/html"


def test_openapi_document_is_served(client):
    document = client.get("/api/openapi.json").get_json()
    assert document["openapi"].startswith("3.1")
    assert {"/api/orders", "/api/orders/{order_id}/cancel", "/webhooks/payments"} <= set(
        document["paths"]
    )
    assert "/api/problems/idempotency-key-reused" in document["info"]["description"]
    # What test_api_schema runs schemathesis against.
    assert document == openapi(24 * 3600, [item["sku"] for item in CATALOGUE])


def test_text_that_is_not_unicode_is_a_400_that_places_nothing(client, api_key, servers):
    # "\ud800" in JSON is a lone surrogate: no UTF-8 column can store it (it was a 500).
    response = place(client, api_key, {**ORDER, "name": "Ada \ud800"})
    assert response.status_code == 400, response.get_data(as_text=True)
    assert order_count(servers) == 0
    # the key was not pinned
    assert place(client, api_key).status_code == 201


def test_an_expected_price_that_is_no_longer_the_products_places_nothing(client, api_key, servers):
    """A client that showed its customer a price may send it: a product that costs
    something else by the time the order is placed is a 409 naming the price now, the
    key still usable; without it the order takes the price of the moment."""
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET price_cents = 1900 WHERE sku = 'MUG-STONE'"))
    refused = place(client, api_key, {**ORDER, "expected_unit_price_cents": 1800})
    assert refused.status_code == 409 and problem_type(refused) == "price-changed"
    assert refused.get_json()["unit_price_cents"] == 1900
    assert order_count(servers) == 0
    placed = place(client, api_key, {**ORDER, "expected_unit_price_cents": 1900})
    assert placed.status_code == 201 and placed.get_json()["unit_price_cents"] == 1900
    huge = place(client, api_key, {**ORDER, "expected_unit_price_cents": 10**40}, key="order-2")
    assert huge.status_code == 422 and "expected_unit_price_cents" in huge.get_json()["errors"]
