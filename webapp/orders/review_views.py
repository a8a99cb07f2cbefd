"""Checkout in two steps: the details (``GET /orders/new``), then a review of exactly
what will be charged (``POST /orders/review``), whose "Place order" is the protected
submit (views.py, ``create``); "Edit" on the review is the details again
(``POST /orders/details``), as typed.

One token for the whole checkout (flask-submit-once/docs/steps.md): the details page is
issued the token of ``orders.create``, and each step carries it
(``submit_once.carry_token``), consuming nothing. Back and forward between the steps, an
edit, Continue pressed again: every way through ends on that one token, so on one order.
The details travel as hidden fields and are validated again by ``create``, which alone
takes effect; the card is typed on the review page and never drawn back into a page.
views.py registers the routes on the order pages' blueprint.
"""

from __future__ import annotations

from flask import current_app, render_template

from ..extensions import submit_once
from ..payments import provider
from .forms import SAMPLE_CARDS
from .order_form import order_form

#: The details page again when the review cannot read the price to show.
CANNOT_PRICE = (
    "We cannot show the price right now, so we cannot show what your order would cost. "
    "Your details are still here: press Continue again in a moment."
)
#: The endpoint whose token the checkout's steps carry: the submit that places the order.
PLACE = "orders.create"


def review():
    """The details, validated, shown read-only with the unit price and total the order
    will be charged (the catalogue as read now, which the review's ``shown_prices``
    carries: a change after this page is ``create``'s 409); a typo is the details page
    again, 422, with the input and the same token."""
    submit_once.carry_token(PLACE)
    form = order_form(card=False)
    if not form.validate():
        return render_template("orders/new.html", form=form, step="details"), 422
    unit = form.prices.get(form.product.data)
    if unit is None:
        # no catalogue to price it from (PostgreSQL away, none read yet): nothing to review
        return render_template(
            "orders/new.html", form=form, step="details", step_notice=CANNOT_PRICE
        ), 503
    shown = form.price_shown()
    return render_template(
        "orders/review.html",
        form=form,
        product=form.products[form.product.data],
        unit_cents=unit,
        total_cents=unit * form.quantity.data,
        # the details page showed another price: the review says so before anything is charged
        price_was_cents=shown if shown is not None and shown != unit else None,
        takes_card=provider() is not None,
        sample_cards=SAMPLE_CARDS if current_app.config["APP_ENV"] != "production" else "",
    )


def edit():
    """Edit, on the review: the details page again with the input as sent and the same
    token, nothing validated (nothing was typed wrong yet)."""
    submit_once.carry_token(PLACE)
    return render_template("orders/new.html", form=order_form(card=False), step="details")
