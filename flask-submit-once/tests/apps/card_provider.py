"""A card provider over HTTP for the docs' charge example: ``POST /v1/charges`` with an
``Idempotency-Key`` answers the same key with the same charge (201), a declined card
with 402; ``fail_after_charge`` makes the next calls charge and then answer 500, as a
provider whose answer is lost does."""

from __future__ import annotations

import threading
from typing import Any

from flask import Flask, request


class CardProvider:
    def __init__(self) -> None:
        self.answers: dict[str, tuple[dict[str, Any], int]] = {}
        self.calls: dict[str, int] = {}
        self.fail_after_charge = 0
        self.lock = threading.Lock()
        self.app = Flask(__name__)
        self.app.add_url_rule("/v1/charges", view_func=self.charge, methods=["POST"])

    def charge(self) -> tuple[dict[str, Any], int]:
        key, body = request.headers["Idempotency-Key"], request.get_json()
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            if key not in self.answers:
                declined = body["card"] == "declined"
                self.answers[key] = (
                    ({"error": "card_declined"}, 402)
                    if declined
                    else ({"id": f"ch_{len(self.charges) + 1}"}, 201)
                )
            if self.fail_after_charge:
                self.fail_after_charge -= 1
                return {"error": "processing_error"}, 500
            return self.answers[key]

    @property
    def charges(self) -> list[str]:
        """The ids of the charges made, one per key that charged."""
        return [answer["id"] for answer, status in self.answers.values() if status == 201]
