"""Ordering on the web: the form, its once-only submit, the confirmation page.

    views.py      the blueprint: GET /orders/new, POST /orders, GET /orders/<id>, and its
                  own answers to a lost session or a Redis or PostgreSQL that is away
    amend_views.py  POST /orders/<id>/amendments: "Update order N with these details", once
    amending.py   which orders can still change, and the change in the submit's transaction
    same_order.py the same order again from this browser session: asked, not placed
    order_form.py the order form as a request gets it (catalogue, card field)
    forms.py      OrderForm (limits from webapp.shop.order_rules)
    messages.py   what the form says for each outcome
    catalogue.py  the products on sale, cached for a few seconds
    review_views.py  the two-step checkout: details, then a review of what is charged
    confirm_by_mail.py  an order's link confirmed by mail before it may change the order
    cli.py        ``flask orders find`` and ``flask orders ship`` for operators

The order itself is built by webapp.shop.placing, which the JSON API uses too, and found
by its link's key with webapp.shop.lookup, which cancel and refunds use too. The package
imports only the messages; :func:`init_app` loads the pages and registers them.
"""

from __future__ import annotations

from flask import Flask

from .messages import EXPIRED, FORM, NOT_CONFIRMED, NOT_PLACED, SESSION_LOST, UNAVAILABLE

__all__ = [
    "EXPIRED",
    "FORM",
    "NOT_CONFIRMED",
    "NOT_PLACED",
    "SESSION_LOST",
    "UNAVAILABLE",
    "init_app",
]


def init_app(app: Flask) -> None:
    """Register the order pages, the confirmation by mail and the ``flask orders`` commands."""
    from . import confirm_by_mail, views
    from .cli import orders

    app.register_blueprint(views.bp)
    app.register_blueprint(confirm_by_mail.bp)
    app.cli.add_command(orders)
