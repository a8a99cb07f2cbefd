"""Ordering on the web: the form, its once-only submit, the confirmation page.

    views.py      the blueprint: GET /orders/new, POST /orders, GET /orders/<id>, and its
                  own answers to a lost session or a Redis or PostgreSQL that is away
    amend_views.py  POST /orders/<id>/amendments: "Update order N with these details", once
    amending.py   which orders can still change, and the change in the submit's transaction
    same_order.py the same order again from this browser session: asked, not placed
    order_form.py the order form as a request gets it (catalogue, card field)
    forms.py      OrderForm (limits from webapp.order_rules)
    lookup.py     an order by the key in its link: find_order, get_order_or_404
    messages.py   what the form says for each outcome
    catalogue.py  the products on sale, cached for a few seconds

The order itself is built by webapp.placing, which the JSON API uses too. The package
imports only the lookup and the messages, so a feature that looks an order up (cancel,
refunds) does not load the order pages; create_app registers ``views.bp``.
"""

from __future__ import annotations

from .lookup import find_order, get_order_or_404
from .messages import EXPIRED, FORM, NOT_CONFIRMED, NOT_PLACED, SESSION_LOST, UNAVAILABLE

__all__ = [
    "EXPIRED",
    "FORM",
    "NOT_CONFIRMED",
    "NOT_PLACED",
    "SESSION_LOST",
    "UNAVAILABLE",
    "find_order",
    "get_order_or_404",
]
