"""Helpers for the JSON API tests: API keys and requests with the right headers."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webapp.api.keys import create_api_key

ORDER = {
    "product": "MUG-STONE",
    "quantity": 2,
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "address": "12 St James's Square\nLondon",
}


def new_api_key(servers, client_name: str = "acme") -> str:
    with Session(servers.engine) as db:
        key = create_api_key(db, client_name)
        db.commit()
    return key


def place(
    client, api_key: str, body: object = None, *, key: str | None = "order-1", **headers: str
):
    """POST /api/orders as a client would."""
    sent = {"Authorization": f"Bearer {api_key}", **headers}
    if key is not None:
        sent["Idempotency-Key"] = key
    return client.post("/api/orders", json=ORDER if body is None else body, headers=sent)


def problem_type(response) -> str:
    assert response.mimetype == "application/problem+json", response.get_data(as_text=True)
    body = response.get_json()
    assert body["status"] == response.status_code and body["title"]
    return body["type"].rsplit("/", 1)[-1]
