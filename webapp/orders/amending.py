"""Changing an order after it is placed: "Update order N with these details".

Offered where a used order form is sent again with other details (Back + edit): the
shopper who meant to change the quantity can change the order instead of placing a
second one. Only while nothing has happened to the order that its details decide: it is
placed and unpaid, placed through the form (an API client's order is its client's), and
no card was charged for it (a card order is charged for its total at once, so its
details are fixed; changing them would need a second charge or a partial refund).

And only from the browser session that placed it, or one the customer confirmed through
the order's email (:func:`placed_here`; webapp/orders/confirm_by_mail.py): the order's
link opens its page, its cancel and its refund to whoever holds it, but a link forwarded,
logged or shoulder-surfed must not be enough to send the order to another address.

:func:`amend_order` runs in the update form's once-only transaction: it locks the
order's row (a payment or a cancel committing meanwhile is seen, not raced), checks the
rule again, reads the product again (one taken off sale since is refused) and records
what changed in an :class:`~webapp.shop.models.OrderAmendment` keyed by the form token's
digest. The order keeps the price it was placed at: only a change of product takes that
product's price, and only the one its page showed (``check_price``, as placing).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from flask import session, url_for
from sqlalchemy import select
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from ..shop.models import Order, OrderAmendment, Product
from ..shop.order_rules import placed_through_api
from ..shop.placing import OrderDetails, check_price
from .same_order import shopper

__all__ = [
    "CONFIRMED_KEPT",
    "CONFIRMED_ORDERS",
    "NOT_PLACED_HERE",
    "NotAmendable",
    "Placed",
    "amend_order",
    "placed",
    "placed_here",
    "why_not_amendable",
]

#: Why an order's details can no longer change, by its status.
FIXED_BY_STATUS = {
    "charging": "its card payment is under way",
    "paid": "it is paid",
    "shipped": "it has shipped",
    "cancelled": "it is cancelled",
    "refunded": "it is refunded",
    "declined": "its card was declined",
}
NOT_AMENDABLE = (
    "Order {number} was not changed: {why}. Your details are still here: "
    "press Place another order to place them as a new order."
)
PRICE_CHANGED = (
    "Order {number} was not changed: the price of {{name}} is now {{now}} (the page showed "
    "{{shown}}). Check the new price below and press Update again."
)
OFF_SALE = (
    "Order {number} was not changed: the product you chose is no longer on sale. "
    "Choose another product and press Update again."
)
#: The orders this browser session confirmed through their email, in Flask's session
#: (the newest CONFIRMED_KEPT).
CONFIRMED_ORDERS = "confirmed_orders"
CONFIRMED_KEPT = 20
NOT_PLACED_HERE = (
    "Order {number} can be changed only from the browser it was placed from, or from one "
    "you confirm through the order's email, so nothing was changed."
)


class NotAmendable(Refused):
    """The order can no longer be changed (or not to these details); the words say why."""


def why_not_amendable(order: Order) -> str | None:
    """Why ``order``'s details can no longer change, in words, or None if they can."""
    if placed_through_api(order):
        return "it was placed through our API, so it is changed there"
    if order.status != "placed":
        return FIXED_BY_STATUS.get(order.status, f"it is {order.status}")
    if order.payment_method is not None:
        return "it is paid by card"
    if order.paid_cents or order.reserved_cents or order.refunded_cents:
        return "a payment was received for it"
    return None


def placed_here(order: Order) -> bool:
    """Whether this browser session may change ``order``: it placed it (the digest of
    the session's own random value, kept in the signed session cookie,
    webapp/orders/same_order.py, is the one the order was stamped with when it was
    placed, ``orders.placed_in_session``; API orders and orders placed before that column
    existed have none), or it confirmed through the order's email (its public id among
    the session's :data:`CONFIRMED_ORDERS`, webapp/orders/confirm_by_mail.py)."""
    mine = shopper(create=False)
    stamped = order.placed_in_session
    if mine is not None and stamped is not None and hmac.compare_digest(mine, stamped):
        return True
    confirmed = session.get(CONFIRMED_ORDERS)
    return isinstance(confirmed, list) and any(
        isinstance(one, str) and hmac.compare_digest(one, order.public_id) for one in confirmed
    )


@dataclass(frozen=True)
class Placed:
    """The order a used form placed, as the form page drawn again offers it."""

    number: str
    public_id: str
    url: str
    # why it cannot be updated; None: "Update order N" is offered
    why_not: str | None
    product_id: int
    # what it was placed at (kept by an update unless told otherwise)
    unit_price_cents: int
    # the version of its details this page shows: an update checks it (VersionedMixin)
    version: int


def placed(order: Order) -> Placed:
    """What the form page drawn again offers for ``order``: Update (and its token) only
    to the session that placed it."""
    why_not = why_not_amendable(order)
    if why_not is None and not placed_here(order):
        why_not = "it was placed from another browser"
    return Placed(
        order.order_number,
        order.public_id,
        url_for("orders.show", public_id=order.public_id),
        why_not,
        order.product_id,
        order.unit_price_cents,
        order.version,
    )


def amend_order(
    db: Session, order_id: int, details: OrderDetails, *, new_price: bool = False
) -> OrderAmendment:
    """Change order ``order_id`` to ``details`` in the caller's transaction; the
    amendment that records it (what changed, ``{column: [before, after]}``), not yet
    flushed. The order keeps its unit price unless its product changes or ``new_price``
    (the shopper ticked "Use today's price"); a price taken is the one the page showed.
    Raises :class:`NotAmendable` with the words to show if it cannot be."""
    # populate_existing: the row as the lock holds it, not as this session last read it.
    order = db.scalar(
        select(Order)
        .where(Order.id == order_id)
        .with_for_update(of=Order)
        .execution_options(populate_existing=True)
    )
    # an order is never deleted; said rather than a 500
    if order is None:
        raise NotAmendable("This order no longer exists, so nothing was changed.")
    why = why_not_amendable(order)
    if why is not None:
        raise NotAmendable(NOT_AMENDABLE.format(number=order.order_number, why=why))
    product = db.scalar(select(Product).where(Product.id == details.product, Product.active))
    if product is None:
        raise NotAmendable(OFF_SALE.format(number=order.order_number))
    if product.id == order.product_id and not new_price:
        # the price it was placed at, whatever it is today
        price = order.unit_price_cents
    else:
        check_price(product, details, PRICE_CHANGED.format(number=order.order_number))
        price = product.price_cents
    after = {
        "product_id": product.id,
        "unit_price_cents": price,
        "quantity": details.quantity,
        "customer_name": details.name,
        "email": details.email,
        "shipping_address": details.address,
    }
    changes = {
        column: [getattr(order, column), value]
        for column, value in after.items()
        if getattr(order, column) != value
    }
    if changes:
        order.product = product
        for column, (_, value) in changes.items():
            setattr(order, column, value)
    return OrderAmendment(order=order, changes=changes)
