"""Placing an order: the one way an :class:`~webapp.shop.models.Order` is built from
validated input, for the order form (:mod:`webapp.orders.views`) and the JSON API
(:mod:`webapp.api.orders`) alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from .amounts import euros
from .models import Order, Product, new_payment_reference
from .order_rules import CURRENCY, new_order_number, new_public_id

__all__ = ["OrderDetails", "PriceChanged", "check_price", "new_order"]

PRICE_CHANGED = (
    "The price of {name} is now {now} (the page showed {shown}), so your order was not "
    "placed and nothing was charged. Check the new price below and press Place order again."
)


@dataclass(frozen=True)
class OrderDetails:
    """What a customer asked for, once validated (by ``OrderForm`` or ``OrderRequest``)."""

    # the product's id (the form's choice) or its SKU (the API)
    product: int | str
    quantity: int
    name: str
    email: str
    address: str
    #: The card's token at the payment provider (the order form's, when it charges one):
    #: the order is written "charging" and its form's step charges it.
    payment_method: str | None = None
    #: The unit price the shopper was shown for this product, in cents (the order form's
    #: own, the API's ``expected_unit_price_cents``); None: none was shown.
    shown_unit_price_cents: int | None = None


class PriceChanged(Refused):
    """The product's price is no longer the one the shopper was shown: nothing is placed
    or charged, and the form comes back with the price as it is now."""

    def __init__(self, product: Product, shown_cents: int, words: str = PRICE_CHANGED) -> None:
        now = euros(product.price_cents)
        super().__init__(words.format(name=product.name, now=now, shown=euros(shown_cents)))
        self.product_id = product.id
        self.price_cents = product.price_cents


def check_price(product: Product, details: OrderDetails, words: str = PRICE_CHANGED) -> None:
    """Raise :class:`PriceChanged` if ``product``, as the caller's transaction read it, no
    longer costs what the shopper was shown: what is charged is the row's price, so it
    must be the one on the page they sent."""
    shown = details.shown_unit_price_cents
    if shown is not None and shown != product.price_cents:
        raise PriceChanged(product, shown, words)


def new_order(db: Session, details: OrderDetails, **recorded: Any) -> Order:
    """The order for ``details``, added to the caller's transaction (not yet flushed):
    the protected view that returns it has it stamped with its submission's digest.

    The product is read again inside the transaction, so one taken off sale since
    validation is refused (:class:`~flask_submit_once.Refused`), not sold, and one whose
    price is no longer the one shown is refused too (:class:`PriceChanged`). Its keys, currency,
    status and time are set here, not left to column defaults, so the order can be read
    (and an API response built from it) before the INSERT. ``recorded`` holds the columns
    only one caller has: the API client, key and response.
    """
    column = Product.id if isinstance(details.product, int) else Product.sku
    product = db.scalar(select(Product).where(column == details.product, Product.active))
    if product is None:
        raise Refused("product no longer on sale")
    check_price(product, details)
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
