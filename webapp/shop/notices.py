"""One-time notices on an order's page: "already placed", "cancelled", "refund requested".

The request that did the thing says so with :func:`notify`, which flashes the notice
into the session (Flask's signed cookie); the order's page shows and removes it. Never
the query string: a link anyone can write would make the page say what did not happen
(``/orders/<key>?cancelled=1`` on a placed order). Each notice names its order by
number, so another order's page opened in between neither shows it nor keeps it.
What each says is written once, in ``templates/orders/_notices.html``, which the page
shows above its headline on every screen size.
"""

from __future__ import annotations

from flask import flash, get_flashed_messages

__all__ = [
    "ALREADY_CANCELLED",
    "ALREADY_PLACED",
    "CANCELLED",
    "CONFIRMED_BY_MAIL",
    "REFUND_ALREADY",
    "REFUND_REQUESTED",
    "notices_for",
    "notify",
]

ALREADY_PLACED = "already_placed"
CANCELLED = "cancelled"
ALREADY_CANCELLED = "already_cancelled"
REFUND_REQUESTED = "refund_requested"
REFUND_ALREADY = "refund_already"
CONFIRMED_BY_MAIL = "confirmed_by_mail"


def notify(order_number: str, notice: str) -> None:
    """Show ``notice`` (one of the names above) the next time the order's page is shown."""
    flash(notice, f"order:{order_number}")


def notices_for(order_number: str) -> frozenset[str]:
    """The notices waiting for this order's page; every waiting notice is removed."""
    return frozenset(get_flashed_messages(category_filter=[f"order:{order_number}"]))
