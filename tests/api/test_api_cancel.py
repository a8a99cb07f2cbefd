"""POST /api/orders/<id>/cancel: idempotent by the state machine; the API key CLI."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.support.api_client import new_api_key, place, problem_type
from tests.support.races import cancel_racing_ship
from webapp.api.keys import hash_key
from webapp.shop.order_states import TransitionRefused

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def api_key(servers) -> str:
    return new_api_key(servers)


@pytest.fixture
def order_url(client, api_key) -> str:
    return place(client, api_key).headers["Location"]


def cancel(client, api_key, url, **headers):
    return client.post(f"{url}/cancel", headers={"Authorization": f"Bearer {api_key}", **headers})


def set_status(servers, status: str) -> None:
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = :s, paid_cents = 3600"), {"s": status})


def test_cancel_twice_is_200_and_still_cancelled(client, api_key, order_url):
    first = cancel(client, api_key, order_url)
    assert first.status_code == 200 and first.get_json()["status"] == "cancelled"
    again = cancel(client, api_key, order_url, **{"Idempotency-Key": "any"})
    assert again.status_code == 200 and again.get_json()["status"] == "cancelled"


def test_a_paid_order_can_be_cancelled(client, api_key, order_url, servers):
    set_status(servers, "paid")
    assert cancel(client, api_key, order_url).get_json()["status"] == "cancelled"


@pytest.mark.parametrize("status", ["shipped", "refunded"])
def test_cancelling_a_shipped_or_refunded_order_is_a_409_saying_why(
    client, api_key, order_url, servers, status
):
    set_status(servers, status)
    response = cancel(client, api_key, order_url)
    assert response.status_code == 409 and problem_type(response) == "order-state-conflict"
    body = response.get_json()
    assert body["detail"] == f"An order that is {status} cannot be cancelled."
    assert body["order_status"] == status


@pytest.mark.parametrize(
    "path",
    [
        "/api/orders/AAAAAAAAAAAAAAAAAAAAAA/cancel",
        "/api/orders/short/cancel",
        "/api/orders/%00%00/cancel",
    ],
)
def test_cancelling_an_unknown_order_is_a_404(client, api_key, path):
    response = client.post(path, headers={"Authorization": f"Bearer {api_key}"})
    assert response.status_code == 404 and problem_type(response) == "not-found"


def test_cancel_needs_the_owning_clients_key(client, order_url, servers):
    assert cancel(client, "sk_wrong", order_url).status_code == 401
    other = new_api_key(servers, "globex")
    assert cancel(client, other, order_url).status_code == 404


def test_concurrent_cancel_and_ship_exactly_one_wins_and_the_loser_is_told_why(
    app, api_key, order_url, servers
):
    set_status(servers, "paid")
    with servers.engine.connect() as conn:
        order_id = conn.scalar(text("SELECT id FROM orders"))
    client = app.test_client()
    cancel_response, shipped = cancel_racing_ship(
        servers.engine, order_id, lambda: cancel(client, api_key, order_url)
    )
    with servers.engine.connect() as conn:
        final = conn.scalar(text("SELECT status FROM orders"))
    if final == "cancelled":
        assert cancel_response.status_code == 200
        assert str(shipped) == "An order that is cancelled cannot be shipped."
    else:
        assert final == "shipped" and not isinstance(shipped, TransitionRefused)
        assert cancel_response.status_code == 409
        assert (
            cancel_response.get_json()["detail"] == "An order that is shipped cannot be cancelled."
        )


def test_create_api_key_command_prints_a_key_once_and_stores_only_its_hash(app, servers):
    result = app.test_cli_runner().invoke(args=["api-keys", "create", "initech"])
    assert result.exit_code == 0, result.output
    key = result.output.strip().splitlines()[-1]
    assert key.startswith("sk_") and len(key) > 40
    with servers.engine.connect() as conn:
        stored = conn.execute(
            text(
                "SELECT k.key_hash FROM api_keys k JOIN api_clients c "
                "ON c.id = k.client_id WHERE c.name = 'initech'"
            )
        ).scalars()
        assert list(stored) == [hash_key(key)]
        assert not conn.scalar(
            text("SELECT count(*) FROM api_keys WHERE key_hash = :k"), {"k": key}
        )
    assert place(app.test_client(), key).status_code == 201


def test_create_api_key_command_refuses_a_blank_client_name(app):
    result = app.test_cli_runner().invoke(args=["api-keys", "create", "  "])
    assert result.exit_code != 0 and "printable" in result.output
