"""The same order sent again from another tab: asked about, never placed silently.

Two renderings of the order form (two tabs, two tokens) are two submissions to the
library, so each would place its order. Within ``SAME_ORDER_WINDOW_SECONDS`` (600; 0:
off) of an order placed from the same browser session, an order with the same product,
quantity, name, email and address is not placed until the shopper confirms it: the form
comes back (input kept) with "You placed this same order N minutes ago (order X)", a
link to it and a "Yes, place another" box, whose value names order X. A confirmation is
for the order it named: another identical order placed since is asked about again.

The session is the shop's own random value in Flask's session (``SESSION_KEY``); orders
store its digest (``orders.placed_in_session``), so the question never names another
browser's order, whoever types the same details.

It is asked twice, for two reasons. At validation (:meth:`OrderForm.validate`, the
common case): the form comes back with its token unspent, so a double click of it gets
the same question, never "expired". And in the submit's transaction, holding a lock on
the session (:func:`hold`): two tabs sent at once both pass validation, and the lock
makes the second see the first's committed order, so it is refused with the same
question (:class:`SameOrderRecently`, a fresh token) instead of placed.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from flask import current_app, session, url_for
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from flask_submit_once import Refused

from ..shop.models import Order
from ..shop.placing import OrderDetails

__all__ = ["SESSION_KEY", "Earlier", "SameOrderRecently", "earlier_same_order", "hold", "shopper"]

#: Where the shop keeps its browser session's random value in Flask's session.
SESSION_KEY = "shopper"
#: The first key of the session's advisory lock (two 32-bit keys: a space apart from the
#: library's one 64-bit key per token).
LOCK_CLASS = 31_004
#: Orders that took nothing: the same one again needs no question.
NOT_COUNTED = ("cancelled", "declined")
QUESTION = (
    "You placed this same order {ago} (order {number}), so we have not placed it "
    "again. To place another one just like it, tick “Yes, place another” and "
    "press Place order."
)


def shopper(*, create: bool) -> str | None:
    """The digest that names this browser session on its orders (the random value is
    made with ``create``, else None when the session has none yet)."""
    value = session.get(SESSION_KEY)
    if not isinstance(value, str):
        if not create:
            return None
        value = session[SESSION_KEY] = secrets.token_urlsafe(16)
    return hashlib.sha256(value.encode()).hexdigest()[:43]


@dataclass(frozen=True)
class Earlier:
    """An order this session placed with the same details, minutes ago."""

    number: str
    public_id: str
    placed_at: datetime

    @property
    def url(self) -> str:
        return url_for("orders.show", public_id=self.public_id)

    @property
    def ago(self) -> str:
        minutes = int((datetime.now(UTC) - self.placed_at).total_seconds() // 60)
        if minutes < 1:
            return "less than a minute ago"
        return "1 minute ago" if minutes == 1 else f"{minutes} minutes ago"

    @property
    def question(self) -> str:
        return QUESTION.format(ago=self.ago, number=self.number)


class SameOrderRecently(Refused):
    """The same order was placed from this session meanwhile: asked, not placed."""

    def __init__(self, earlier: Earlier) -> None:
        super().__init__(earlier.question)
        self.earlier = earlier


def window() -> timedelta:
    return timedelta(seconds=current_app.config["SAME_ORDER_WINDOW_SECONDS"])


def earlier_same_order(
    db: Session, details: OrderDetails, placed_in: str | None, confirmed: str | None
) -> Earlier | None:
    """The newest order ``placed_in`` this session within the window with ``details``,
    unless ``confirmed`` names it (the shopper ticked "Yes, place another" for it)."""
    if placed_in is None or not isinstance(details.product, int) or not window():
        return None
    row = db.execute(
        select(Order.order_number, Order.public_id, Order.created_at)
        .where(
            Order.placed_in_session == placed_in,
            Order.created_at >= datetime.now(UTC) - window(),
            Order.status.not_in(NOT_COUNTED),
            Order.product_id == details.product,
            Order.quantity == details.quantity,
            Order.customer_name == details.name,
            Order.email == details.email,
            Order.shipping_address == details.address,
        )
        .order_by(Order.created_at.desc())
        .limit(1)
    ).one_or_none()
    if row is None or row.order_number == confirmed:
        return None
    return Earlier(row.order_number, row.public_id, row.created_at)


def hold(db: Session, placed_in: str) -> None:
    """Lock this session's orders until the caller's transaction ends: two of its submits
    check and place one after the other. Waits for the other's COMMIT (a few ms). With
    the window at 0 nothing is asked, so nothing is held (no round trip)."""
    if not window():
        return
    key = int.from_bytes(bytes.fromhex(placed_in[:8]), "big", signed=True)
    db.execute(text("SELECT pg_advisory_xact_lock(:cls, :key)"), {"cls": LOCK_CLASS, "key": key})
