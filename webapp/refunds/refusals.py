"""The refund pages' refusals, each a page of its own with a way back to the order:
nothing can be refunded on the order (unpaid, or refunded in full: 409), or an API
client placed it and refunds it through us, not this page (403). Under htmx, whose
request expects the form back, they answer ``HX-Refresh``: the refund page reloads
and its GET says the same as a whole page."""

from __future__ import annotations

from flask import Response, render_template
from werkzeug.exceptions import Conflict

from ..htmx import sent_by_htmx
from ..shop.models import Order
from .requests import REFUNDABLE

__all__ = ["NothingToRefund", "nothing_left", "nothing_to_refund", "through_the_api"]


def nothing_left(order: Order) -> bool:
    """Whether nothing can ever be refunded on ``order`` (requests not yet applied
    aside: one may still fail and free its amount)."""
    return order.status not in REFUNDABLE or order.paid_cents - order.refunded_cents <= 0


class NothingToRefund(Conflict):
    """Nothing can ever be refunded on this order (unpaid, or refunded in full): the
    page says which, with a link back to the order."""

    def __init__(self, order: Order) -> None:
        fully = order.paid_cents > 0 and order.refunded_cents >= order.paid_cents
        super().__init__(
            "Nothing can be refunded on this order: "
            + (
                "nothing was paid for it."
                if order.paid_cents == 0
                else "it is refunded in full."
                if fully
                else f"it is {order.status}."
            )
        )
        self.order, self.fully = order, fully


def nothing_to_refund(error: NothingToRefund):
    if sent_by_htmx():
        return whole_page_again(409)
    return render_template(
        "orders/refund_refused.html", order=error.order, fully=error.fully, reason=error.description
    ), 409


def whole_page_again(status: int):
    """Under htmx: reload the refund page rather than swap a page into the form."""
    return Response("", status, {"HX-Refresh": "true"})


def through_the_api(order: Order):
    """An order an API client placed is its client's to refund: a 403 saying so;
    nothing requested, no token issued or spent."""
    if sent_by_htmx():
        return whole_page_again(403)
    return render_template("orders/through_api.html", order=order, action="refunded"), 403
