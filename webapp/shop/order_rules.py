"""The rules an order meets, wherever it comes from: the HTML form
(:mod:`webapp.orders.forms`), the JSON API (:mod:`webapp.api.schemas`) and the
tables (:mod:`webapp.shop.models`) all read them here, so they cannot drift apart.
Plain values and functions only: no Flask, no database, no imports of the shop.

An order has two names. The **order number** (``new_order_number``: 10
characters, read out and quoted in support emails) opens nothing. The
**public id** (128 random bits) is the key in the private link
``/orders/<public_id>``: whoever has it can see and act on the order, so it is
never shown as a number, logged or used as a metric label.

:func:`is_public_id` is the shape a key must have before any SQL is sent for it
(:mod:`webapp.shop.lookup` finds orders by it).
"""

from __future__ import annotations

import re
import secrets
from typing import Protocol

__all__ = [
    "ADDRESS_MAX",
    "CURRENCY",
    "EMAIL_MAX",
    "NAME_MAX",
    "NO_SUCH_ORDER",
    "ORDER_NUMBER_LENGTH",
    "PRODUCT_NAME_MAX",
    "PUBLIC_ID_PATTERN",
    "QUANTITY_MAX",
    "QUANTITY_MIN",
    "SKU_MAX",
    "has_control_chars",
    "is_public_id",
    "new_order_number",
    "new_public_id",
    "normal_order_number",
    "placed_through_api",
]

NAME_MAX = 100
# RFC 5321's limit on a path
EMAIL_MAX = 254
ADDRESS_MAX = 500
QUANTITY_MIN, QUANTITY_MAX = 1, 99
SKU_MAX = 32
PRODUCT_NAME_MAX = 120

#: What :func:`new_public_id` makes: 16 random bytes, URL-safe base64, no padding.
PUBLIC_ID_LENGTH = 22
PUBLIC_ID_PATTERN = r"[A-Za-z0-9_-]{22}"
_PUBLIC_ID = re.compile(PUBLIC_ID_PATTERN)

#: An order link is a key, not a number: a mistyped one is told so in those words.
NO_SUCH_ORDER = "There is no order at this link. Check that you copied all of it."

#: The currency of today's catalogue (ISO 4217); every order carries its own.
CURRENCY = "EUR"

#: Order numbers: no 0/O, 1/I/L, U, so a number read out over the phone survives.
ORDER_NUMBER_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
ORDER_NUMBER_LENGTH = 10


def new_public_id() -> str:
    """128 random bits: the only handle on an order that leaves the server."""
    return secrets.token_urlsafe(16)


def new_order_number() -> str:
    """A short number for people (about 49 random bits; UNIQUE in the table). It is
    not a secret and not a key: nothing opens with it alone."""
    return "".join(secrets.choice(ORDER_NUMBER_ALPHABET) for _ in range(ORDER_NUMBER_LENGTH))


def normal_order_number(value: str) -> str:
    """An order number as a person may type it ("kx7p-2m9q rt"), in its stored form."""
    return re.sub(r"[\s-]", "", value).upper()


def is_public_id(value: str) -> bool:
    """Whether ``value`` has the shape of a public id (checked before any SQL)."""
    return _PUBLIC_ID.fullmatch(value) is not None


def has_control_chars(value: str, allow: str = "") -> bool:
    """Whether ``value`` holds characters that are not printable (except ``allow``)."""
    return any(not ch.isprintable() and ch not in allow for ch in value)


class _Owned(Protocol):
    # an Order's: set when an API client placed it
    api_client_id: int | None


def placed_through_api(order: _Owned) -> bool:
    """Whether an API client placed ``order``: its client cancels it through the API,
    not through the HTML pages, which only need the link's key."""
    return order.api_client_id is not None
