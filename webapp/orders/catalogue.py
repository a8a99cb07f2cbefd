"""The catalogue as the order form shows it, read at most every few seconds."""

from __future__ import annotations

import time

from flask import current_app, has_app_context
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..shop.models import Product

__all__ = ["active_products", "forget_prices", "last_known_products"]

#: (when it was read, the products): shared by this process's threads.
_catalogue: tuple[float, list[Product]] = (float("-inf"), [])


def active_products(db: Session, *, max_age: float | None = None) -> list[Product]:
    """The products on sale, in catalogue order, as read at most ``max_age`` seconds
    ago (default: the app's ``CATALOGUE_CACHE_SECONDS``; 0 reads every time).

    Reusing a recent read saves a PostgreSQL round trip on every form and submit, and
    is safe: the submit reads the product again inside its transaction, so one taken
    off sale meanwhile is refused, never sold.
    """
    global _catalogue
    if max_age is None:
        max_age = current_app.config.get("CATALOGUE_CACHE_SECONDS", 0) if has_app_context() else 0
    read_at, products = _catalogue
    now = time.monotonic()
    if max_age and now - read_at < max_age:
        return list(products)
    products = list(db.scalars(select(Product).where(Product.active).order_by(Product.id)))
    _catalogue = (now, products)
    return list(products)


def last_known_products() -> list[Product]:
    """The catalogue as last read, to redraw a form while PostgreSQL is away."""
    return list(_catalogue[1])


def forget_prices() -> None:
    """Read the catalogue again next time: a submit found a price changed since (the
    products stay known, for a form drawn while PostgreSQL is away)."""
    global _catalogue
    _catalogue = (float("-inf"), _catalogue[1])
