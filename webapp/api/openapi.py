"""The OpenAPI 3.1 description of the JSON API and the payment webhook.

The bodies' schemas are generated from the pydantic models that validate them
(webapp.api.schemas, webapp.webhooks.event); the operations, their headers and
responses are written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask import Blueprint, current_app, jsonify

from ..db import sessions
from ..problems import PROBLEMS, problem_type
from ..shop.order_rules import PUBLIC_ID_LENGTH, PUBLIC_ID_PATTERN
from ..webhooks.event import PaymentEvent
from ..webhooks.signatures import HEADER_PATTERN, MAX_HEADER_LENGTH
from .idempotency import KEY_PATTERN
from .schemas import OrderBody, OrderRequest, Problem, skus_on_sale

bp = Blueprint("openapi", __name__)


@bp.get("/api/openapi.json")
def document():
    with sessions()() as db:
        skus = skus_on_sale(db)
    return jsonify(openapi(int(current_app.config["IDEMPOTENCY_RETENTION"]), skus))


def _problem(description: str) -> dict[str, Any]:
    schema = {"$ref": "#/components/schemas/Problem"}
    return {"description": description, "content": {"application/problem+json": {"schema": schema}}}


def _order(description: str, **headers: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        },
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}}},
    }


ORDER_ID = {
    "name": "order_id",
    "in": "path",
    "required": True,
    "schema": {
        "type": "string",
        "minLength": PUBLIC_ID_LENGTH,
        "maxLength": PUBLIC_ID_LENGTH,
        "pattern": f"^{PUBLIC_ID_PATTERN}$",
    },
}
#: The bodies, as pydantic describes them: what validates a request is what is documented.
SCHEMAS = {
    "OrderRequest": OrderRequest.model_json_schema(),
    "Order": OrderBody.model_json_schema(mode="serialization"),
    "PaymentEvent": PaymentEvent.model_json_schema(),
    "Problem": Problem.model_json_schema(),
}
AUTH_ERRORS = {
    "401": _problem("No, unknown, revoked or expired API key."),
    "404": _problem("No such order for this client."),
}
#: Where a placed order leads: its id is the path of its page and of its cancel.
ORDER_LINKS = {
    f"{verb}Order": {
        "operationId": f"{verb.lower()}Order",
        "parameters": {"order_id": "$response.body#/id"},
    }
    for verb in ("Get", "Cancel")
}


def _schemas(skus: Sequence[str]) -> dict[str, Any]:
    """SCHEMAS, the order's product one of ``skus``: a SKU that is not on sale is refused
    (422), so the document names the ones that are."""
    order = SCHEMAS["OrderRequest"]
    product = {
        **order["properties"]["product"],
        "enum": list(skus),
        "description": "SKU of a product on sale (these, when this document was "
        "served; one taken off sale since is refused with a 422).",
    }
    return {
        **SCHEMAS,
        "OrderRequest": {**order, "properties": {**order["properties"], "product": product}},
    }


def openapi(retention: int, skus: Sequence[str]) -> dict[str, Any]:
    """The document; ``retention`` (seconds) is stated where clients read it, and
    ``skus`` are the products on sale."""
    hours = f"{retention / 3600:g} h"
    types = "\n".join(
        f"- `{problem_type(slug)}` ({status}): {title}"
        for slug, (status, title) in PROBLEMS.items()
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Fernleaf orders API",
            "version": "1.0.0",
            "description": (
                "Place orders exactly once. Every `POST /api/orders` carries an `Idempotency-Key` "
                "(1-255 printable ASCII characters, bare or as a quoted string): reuse it on every "
                "retry of the same order. A retry with the same key and body gets the first "
                "response again with `Idempotent-Replayed: true`. "
                f"**Results are kept {hours} ({retention} s)** after the order was placed; the "
                "`Idempotency-Key-Expires` response header gives the exact time. After that the "
                "key is retired (422). A request that failed validation (422) or failed on our "
                "side (5xx) does not use up its key.\n\nErrors are RFC 9457 problem details; "
                f"`type` is stable per case:\n{types}"
            ),
        },
        "components": {
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
            "schemas": _schemas(skus),
        },
        "security": [{"apiKey": []}],
        "paths": {
            "/api/orders": {
                "post": {
                    "operationId": "placeOrder",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": True,
                            "description": "Bare (no commas, not starting with a "
                            "quote) or a quoted string; not all blanks.",
                            "schema": {"type": "string", "pattern": KEY_PATTERN},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/OrderRequest"}
                            }
                        },
                    },
                    "responses": {
                        "201": {
                            **_order(
                                "Placed now, or replayed (`Idempotent-Replayed: true`).",
                                **{
                                    "Idempotency-Key-Expires": "Until when a retry with "
                                    "this key is replayed (HTTP-date).",
                                    "Idempotent-Replayed": "`true` on a replay.",
                                    "Location": "The order's URL.",
                                },
                            ),
                            "links": ORDER_LINKS,
                        },
                        "400": _problem("Idempotency-Key missing or malformed, or body not JSON."),
                        "401": AUTH_ERRORS["401"],
                        "409": _problem(
                            "The first request with this key is still running; "
                            "retry after `Retry-After` seconds. Or (`price-changed`) the "
                            "product no longer costs `expected_unit_price_cents`: nothing "
                            "was placed, the price now is in `unit_price_cents`, and the key "
                            "is not used up."
                        ),
                        "415": _problem("Body is not application/json."),
                        "422": _problem(
                            "Invalid fields (key not used up), or the key was used "
                            "with a different request, or it is past retention."
                        ),
                        "503": _problem("Nothing was placed; retry with the same key."),
                    },
                }
            },
            "/api/orders/{order_id}": {
                "get": {
                    "operationId": "getOrder",
                    "parameters": [ORDER_ID],
                    "responses": {
                        "200": {
                            **_order("The order now."),
                            "links": {"CancelOrder": ORDER_LINKS["CancelOrder"]},
                        },
                        **AUTH_ERRORS,
                    },
                }
            },
            "/api/orders/{order_id}/cancel": {
                "post": {
                    "operationId": "cancelOrder",
                    "parameters": [ORDER_ID],
                    "description": "Idempotent: cancelling a cancelled order is a 200.",
                    "responses": {
                        "200": {
                            **_order("The order, cancelled."),
                            "links": {"GetOrder": ORDER_LINKS["GetOrder"]},
                        },
                        **AUTH_ERRORS,
                        "409": _problem(
                            "The order can no longer be cancelled "
                            "(shipped or refunded); `detail` says why."
                        ),
                    },
                }
            },
            "/webhooks/payments": {
                "post": {
                    "operationId": "paymentEvent",
                    "security": [],
                    "description": "Called by the payment provider. `Payment-Signature: t=<unix "
                    "time>,v1=<hex HMAC-SHA256 of '<t>.' + body>`; 5 min tolerance. "
                    "Each event id takes effect once.",
                    "parameters": [
                        {
                            "name": "Payment-Signature",
                            "in": "header",
                            "required": True,
                            "schema": {
                                "type": "string",
                                "maxLength": MAX_HEADER_LENGTH,
                                "pattern": HEADER_PATTERN,
                            },
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/PaymentEvent"}
                            }
                        },
                    },
                    "responses": {
                        "200": {"description": "Applied now, or already applied (duplicate)."},
                        "400": _problem("Bad, missing or too old signature; nothing recorded."),
                        "409": _problem("Cannot apply yet (e.g. refund before payment): retry."),
                        "422": _problem("Invalid event, unknown order, or amount over paid."),
                        "503": _problem("Not applied; retry."),
                    },
                }
            },
        },
    }
