"""How a page finds an order by the key in its link.

The key's shape (:func:`webapp.shop.order_rules.is_public_id`) is checked before any SQL,
so a NUL byte or a 2 kB path segment is a 404, never a database error.
"""

from __future__ import annotations

from flask import abort, g
from sqlalchemy import select

from ..db import sessions
from .models import Order
from .order_rules import NO_SUCH_ORDER, is_public_id

__all__ = ["find_order", "get_order_or_404", "is_public_id"]


def find_order(public_id: str) -> Order | None:
    """The order with this public id, or None; a malformed id never reaches SQL."""
    if not is_public_id(public_id):
        return None
    with sessions()() as db:
        order = db.scalar(select(Order).where(Order.public_id == public_id))
    if order is not None:
        # what the request log names it by, never the key
        g.order_number = order.order_number
    return order


def get_order_or_404(public_id: str) -> Order:
    """The order with this public id, or a 404 page saying there is none."""
    order = find_order(public_id)
    if order is None:
        abort(404, NO_SUCH_ORDER)
    return order
