"""The baseline: the order form with identical work minus the token layer.

Same OrderForm validation (CSRF included), same catalogue read, same template,
same INSERT through :func:`webapp.orders.place_order`, same 303 to the same
confirmation page. What it leaves out is exactly the token layer: no SET on
render, no advisory lock, no GETDEL, no digest (the UNIQUE column gets a random
value). It lives only here, mounted under /baseline by bench/app.py; the
production app has no switch for it.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, redirect, render_template, url_for

from submit_once import Rendering
from webapp.db import sessions
from webapp.orders import place_order
from webapp.orders.catalogue import active_products
from webapp.orders.forms import OrderForm

bp = Blueprint("baseline", __name__, url_prefix="/baseline")

#: Stands in for a token in the hidden input, so the page is the same size.
NO_TOKEN = "-" * 43


@bp.get("/orders/new")
def new():
    return form_page(NO_TOKEN)


@bp.post("/orders")
def create():
    return validate_and_place(NO_TOKEN)


def form_page(form_token: str):
    """The order form, as the real view renders it, with ``form_token`` in it."""
    with sessions()() as db:
        form = OrderForm(active_products(db))
    return render_template("orders/new.html", form=form, form_token=form_token, once=Rendering())


def validate_and_place(form_token: str):
    """Validate, INSERT (a random value in the UNIQUE column), COMMIT, 303 to the
    confirmation page; the form again (422) when invalid."""
    with sessions()() as db:
        form = OrderForm(active_products(db))
    if not form.validate():
        return render_template("orders/new.html", form=form, form_token=form_token,
                               once=Rendering(422, reason="invalid")), 422
    with sessions()() as db:
        placed = place_order(db, form, secrets.token_urlsafe(32))
        db.commit()
    return redirect(url_for("orders.show", public_id=placed.public_id), 303)
