"""Ordering on the web: the form, its once-only submit, the confirmation page.

    views.py      the blueprint: GET /orders/new, POST /orders, GET /orders/<id>, and its
                  own answers to a lost session or a Redis or PostgreSQL that is away
    forms.py      OrderForm (limits from webapp.order_rules)
    lookup.py     an order by the key in its link: find_order, get_order_or_404
    catalogue.py  the products on sale, cached for a few seconds

The order itself is built by webapp.placing, which the JSON API uses too.
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
