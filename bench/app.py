"""What the benchmark serves: the production app plus two variants of its order form.

    gunicorn 'bench.app:create_app()'

**baseline** (/baseline): identical work minus the token layer. Same OrderForm
validation (CSRF included), same catalogue read, same template, same INSERT through
:func:`webapp.orders.views.place_order`, same 303 to the same confirmation page; no SET on
render, no advisory lock, no GETDEL, no digest (the UNIQUE column gets a random value).

**floor** (/floor): the baseline plus the two Redis commands any store-backed token
costs, ``SET floor:<token> 1 EX 3600 NX`` on render and ``GETDEL floor:<token>`` on
submit, sent through the app's redis-py client (``submit_once.redis``, the client and
pool the token store uses) with its public ``set`` and ``getdel``. No session binding,
no limits, no lock, no signals. What the token layer costs above this is ours to cut;
what this costs above the baseline is the price of asking Redis at all.

The signed-nonce alternative is bench/nonce.py (/nonce). None of it is in the product.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, Flask, abort, redirect, render_template, request, url_for

import webapp
from submit_once import Rendering
from webapp.db import sessions
from webapp.extensions import submit_once
from webapp.orders.catalogue import active_products
from webapp.orders.forms import OrderForm
from webapp.orders.views import place_order

from . import nonce

baseline = Blueprint("baseline", __name__, url_prefix="/baseline")
floor = Blueprint("floor", __name__, url_prefix="/floor")

#: Stands in for a token in the hidden input, so the page is the same size.
NO_TOKEN = "-" * 43


def create_app() -> Flask:
    """The real app (configured from the environment) with the variants beside it."""
    app = webapp.create_app()
    for blueprint in (baseline, floor, nonce.bp):
        app.register_blueprint(blueprint)
    return app


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


@baseline.get("/orders/new")
def baseline_form():
    return form_page(NO_TOKEN)


@baseline.post("/orders")
def baseline_submit():
    return validate_and_place(NO_TOKEN)


@floor.get("/orders/new")
def floor_form():
    token = secrets.token_urlsafe(32)
    submit_once.redis.set(f"floor:{token}", 1, ex=3600, nx=True)
    return form_page(token)


@floor.post("/orders")
def floor_submit():
    token = request.form.get("form_token", "")
    if submit_once.redis.getdel(f"floor:{token}") is None:
        abort(409)
    return validate_and_place(token)
