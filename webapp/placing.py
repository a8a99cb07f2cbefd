"""Placing an order: the one way an :class:`~webapp.models.Order` is built from
validated input, for the order form (:mod:`webapp.orders.views`) and the JSON API
(:mod:`webapp.api.orders`) alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from .models import Order, Product, new_payment_reference
from .order_rules import CURRENCY, new_order_number, new_public_id

__all__ = ["OrderDetails", "new_order"]


@dataclass(frozen=True)
class OrderDetails:
    """What a customer asked for, once validated (by ``OrderForm`` or ``OrderRequest``)."""

    product: int | str  # the product's id (the form's choice) or its SKU (the API)
    quantity: int
    name: str
    email: str
    address: str
    #: The card's token at the payment provider (the order form's, when it charges one):
    #: the order is written "charging" and its form's step charges it.
    payment_method: str | None = None


def new_order(db: Session, details: OrderDetails, **recorded: Any) -> Order:
    """The order for ``details``, added to the caller's transaction (not yet flushed):
    the protected view that returns it has it stamped with its submission's digest.

    The product is read again inside the transaction, so one taken off sale since
    validation is refused (:class:`~flask_submit_once.Refused`), not sold. Its keys, currency,
    status and time are set here, not left to column defaults, so the order can be read
    (and an API response built from it) before the INSERT. ``recorded`` holds the columns
    only one caller has: the API client, key and response.
    """
    column = Product.id if isinstance(details.product, int) else Product.sku
    product = db.scalar(select(Product).where(column == details.product, Product.active))
    if product is None:
        raise Refused("product no longer on sale")
    order = Order(
        public_id=new_public_id(),
        order_number=new_order_number(),
        payment_reference=new_payment_reference(),
        currency=CURRENCY,
        status="charging" if details.payment_method else "placed",
        payment_method=details.payment_method,
        created_at=datetime.now(UTC),
        product=product,
        quantity=details.quantity,
        unit_price_cents=product.price_cents,
        customer_name=details.name,
        email=details.email,
        shipping_address=details.address,
        **recorded,
    )
    db.add(order)
    return order
