"""Make an order in the database one an API client placed, which the HTML pages must
not let the link's key cancel or refund."""

from __future__ import annotations

from sqlalchemy import text

from tests.conftest import Servers


def hand_to_api_client(servers: Servers, order_id: int | None = None) -> None:
    """Mark the order (the only one, unless ``order_id``) as placed through the JSON API."""
    with servers.engine.begin() as conn:
        client_id = conn.scalar(
            # api_clients outlive a test: reuse the row
            text(
                "INSERT INTO api_clients (name) VALUES ('partner') "
                "ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id"
            )
        )
        conn.execute(
            text(
                "UPDATE orders SET api_client_id = :c, idempotency_key = 'k', "
                "submission_fingerprint = 'f' "
                "WHERE CAST(:id AS bigint) IS NULL OR id = :id"
            ),
            {"c": client_id, "id": order_id},
        )
