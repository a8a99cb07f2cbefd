"""The rules an order meets, wherever it comes from: the HTML form
(:mod:`webapp.orders.forms`), the JSON API (:mod:`webapp.api.schemas`) and the
tables (:mod:`webapp.models`) all read them here, so they cannot drift apart.

Also the shape of an order's public id and the one way a page looks an order
up by it: :func:`get_order_or_404` checks the shape before any SQL, so a NUL
byte or a 2 kB path segment is a 404, never a database error.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from flask import abort
from sqlalchemy import select

if TYPE_CHECKING:
    from .models import Order

__all__ = ["ADDRESS_MAX", "EMAIL_MAX", "NAME_MAX", "NO_SUCH_ORDER", "PUBLIC_ID_PATTERN",
           "QUANTITY_MAX", "QUANTITY_MIN", "SKU_MAX", "get_order_or_404", "has_control_chars",
           "is_public_id", "new_public_id"]

NAME_MAX = 100
EMAIL_MAX = 254  # RFC 5321's limit on a path
ADDRESS_MAX = 500
QUANTITY_MIN, QUANTITY_MAX = 1, 99
SKU_MAX = 32

#: What :func:`new_public_id` makes: 16 random bytes, URL-safe base64, no padding.
PUBLIC_ID_LENGTH = 22
PUBLIC_ID_PATTERN = r"[A-Za-z0-9_-]{22}"
_PUBLIC_ID = re.compile(PUBLIC_ID_PATTERN)

NO_SUCH_ORDER = "There is no order with this number."


def new_public_id() -> str:
    """128 random bits: the only handle on an order that leaves the server."""
    return secrets.token_urlsafe(16)


def is_public_id(value: str) -> bool:
    """Whether ``value`` has the shape of a public id (checked before any SQL)."""
    return _PUBLIC_ID.fullmatch(value) is not None


def has_control_chars(value: str, allow: str = "") -> bool:
    """Whether ``value`` holds characters that are not printable (except ``allow``)."""
    return any(not ch.isprintable() and ch not in allow for ch in value)


def get_order_or_404(public_id: str) -> Order:
    """The order with this public id, or a 404 page saying there is none."""
    # Imported here: the models read the limits above, so this module loads first.
    from .db import sessions
    from .models import Order

    order = None
    if is_public_id(public_id):  # anything else (a NUL, 2 kB) never reaches SQL
        with sessions()() as db:
            order = db.scalar(select(Order).where(Order.public_id == public_id))
    if order is None:
        abort(404, NO_SUCH_ORDER)
    return order
