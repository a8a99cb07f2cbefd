"""Order status transitions: one conditional UPDATE each, never read-then-write.

    placed ──pay──▶ paid ──ship──▶ shipped
      │              │               │
      └──cancel──────┴──▶ cancelled  │
                paid|shipped|cancelled ──refund (in full)──▶ refunded

    charging ──charge──▶ paid        the checkout's card charge (webapp/payments/checkout.py)
        └────decline───▶ declined    nothing charged, nothing ships

A charging order cannot be cancelled: the charge in flight would land on a cancelled
order. Its own webhook (the provider announcing the charge) may pay it before the
checkout records it: ``pay`` starts from charging too.

A cancelled order that was paid stays refundable: cancelling must never be the
step that keeps the customer's money.

A transition is ``UPDATE orders SET status = :to WHERE id = :id AND status IN
(:from...)``; the row count says whether it happened. Two requests racing to
cancel and ship the same order cannot both win: PostgreSQL serialises the two
UPDATEs on the row, and the second one re-checks the WHERE against the first's
result. Repeating a transition that already happened is a success with no
effect; an impossible one raises :class:`TransitionRefused` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from .models import Order

__all__ = ["TRANSITIONS", "OrderNotFound", "TransitionRefused", "Transitioned", "transition"]

#: action -> (statuses it may start from, status it ends in)
TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "pay": (frozenset({"placed", "charging"}), "paid"),
    "charge": (frozenset({"charging"}), "paid"),
    "decline": (frozenset({"charging"}), "declined"),
    "ship": (frozenset({"paid"}), "shipped"),
    "cancel": (frozenset({"placed", "paid"}), "cancelled"),
    "refund": (frozenset({"paid", "shipped", "cancelled"}), "refunded"),
}


class OrderNotFound(LookupError):
    """No order has this id."""


class TransitionRefused(Exception):
    """The order is in a status the action cannot start from."""

    def __init__(self, action: str, status: str) -> None:
        super().__init__(f"An order that is {status} cannot be {_PAST[action]}.")
        self.action, self.status = action, status


_PAST = {
    "pay": "paid",
    "ship": "shipped",
    "cancel": "cancelled",
    "refund": "refunded",
    "charge": "charged",
    "decline": "declined",
}


@dataclass(frozen=True)
class Transitioned:
    """``changed`` is False when the order was already in ``status`` (a repeat)."""

    status: str
    changed: bool


def transition(db: Session, order_id: int, action: str, **values: object) -> Transitioned:
    """Apply ``action`` to the order in the caller's transaction.

    Extra ``values`` (e.g. ``paid_cents=...``) are written by the same UPDATE,
    so they take effect only if the transition does.
    """
    sources, target = TRANSITIONS[action]
    changed = db.execute(
        update(Order)
        .where(Order.id == order_id, Order.status.in_(sources))
        .values(status=target, updated_at=func.now(), **values)
        .returning(Order.id)
    ).first()
    if changed is not None:
        return Transitioned(target, True)
    # The UPDATE matched nothing: read the status only to say why.
    status = db.scalar(select(Order.status).where(Order.id == order_id))
    if status is None:
        raise OrderNotFound(order_id)
    if status == target:
        return Transitioned(target, False)
    raise TransitionRefused(action, status)
