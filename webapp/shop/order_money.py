"""Where an order's money is: due, paid, being refunded, refunded in part or in full.

Every page about an order (its page, its cancel and refund pages) reads the order's state
from :func:`money_of` and says it in the words of ``templates/orders/_state.html``, so a
headline and the notices under it cannot tell two stories. Plain values only: the order's
row and its refund requests, as the page already has them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from flask import Flask

__all__ = ["Money", "init_app", "money_of"]


class _Order(Protocol):
    status: str
    total_cents: int
    paid_cents: int
    refunded_cents: int
    reserved_cents: int


class _Request(Protocol):
    amount_cents: int
    status: str


@dataclass(frozen=True)
class Money:
    """An order's money in cents. ``refunding``: requested, being applied; ``in_review``:
    requested on a shipped order, waiting for the team (both are reserved on the order)."""

    status: str
    total: int
    paid: int
    refunded: int
    refunding: int
    in_review: int

    @property
    def stage(self) -> str:
        """``due`` (placed, not paid), ``charging`` (the checkout's card charge not yet
        confirmed), ``declined`` (the card was refused), ``unpaid`` (cancelled before
        paying), ``paid``,
        ``refunding`` / ``refunding_part`` (requested: all of what is paid, or part),
        ``refunded_part`` or ``refunded``."""
        if self.paid == 0:
            if self.status in ("charging", "declined"):
                return self.status
            return "due" if self.status == "placed" else "unpaid"
        if self.refunded >= self.paid:
            return "refunded"
        if self.refunding:
            return "refunding" if self.refunded + self.refunding >= self.paid else "refunding_part"
        return "refunded_part" if self.refunded else "paid"

    @property
    def headline(self) -> str:
        """What the order page's headline says: the status where it decides (on its way,
        cancelled, refunded), else where the money is."""
        return (
            self.status
            if self.status in ("shipped", "cancelled", "refunded", "charging", "declined")
            else self.stage
        )


def money_of(order: _Order, requests: Iterable[_Request] = ()) -> Money:
    """``order``'s money, with its refund requests (to tell the reviewed from the rest)."""
    in_review = sum(r.amount_cents for r in requests if r.status == "review")
    return Money(
        order.status,
        order.total_cents,
        order.paid_cents,
        order.refunded_cents,
        max(order.reserved_cents - in_review, 0),
        in_review,
    )


def init_app(app: Flask) -> None:
    app.jinja_env.globals["money_of"] = money_of
