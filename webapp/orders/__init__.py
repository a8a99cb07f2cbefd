"""Ordering on the web: the form, its once-only submit, the confirmation page.

    views.py      the blueprint: GET /orders/new, POST /orders, GET /orders/<id>
    forms.py      OrderForm (limits from webapp.order_rules)
    catalogue.py  the products on sale, cached for a few seconds
"""

from __future__ import annotations

from .views import (
    EXPIRED,
    FORM,
    NOT_CONFIRMED,
    NOT_PLACED,
    SESSION_LOST,
    UNAVAILABLE,
    bp,
    place_order,
    resubmit_after_session_loss,
    resubmit_when_unavailable,
)

__all__ = ["EXPIRED", "FORM", "NOT_CONFIRMED", "NOT_PLACED", "SESSION_LOST", "UNAVAILABLE", "bp",
           "place_order", "resubmit_after_session_loss", "resubmit_when_unavailable"]
