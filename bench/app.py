"""What the benchmark serves: the production app plus two variants of its order form.

    gunicorn 'bench.app:create_app()'

**baseline** (/baseline): identical work minus the token layer. The same form
(:func:`webapp.orders.views.order_form`: CSRF included, the catalogue read through the
request's session), the same template, the same INSERT through
:func:`webapp.shop.placing.new_order`, the same 303 to the same confirmation page; no token
issued at render, no advisory lock, no GETDEL, no fingerprint (the UNIQUE column gets a
random value).

**floor** (/floor): the baseline plus the two Redis commands any store-backed token
costs, ``SET floor:<token> 1 EX 3600 NX`` on render and ``GETDEL floor:<token>`` on
submit, sent through the app's redis-py client (``submit_once.redis``, the client and
pool the token store uses) with its public ``set`` and ``getdel``. No session binding,
no limits, no lock, no signals. What the token layer costs above this is ours to cut;
what this costs above the baseline is the price of asking Redis at all.

The lean app's variants (bench/lean.py) are mounted beside them.

The order template draws its hidden input with the ``submit_once`` template object;
these variants hand the template their own (:class:`bench.pages.FixedToken`, a template variable
shadows the global), so rendering it issues nothing. The signed-nonce alternative is
bench/nonce.py (/nonce). None of it is in the product.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, Flask, abort, request

import webapp
from webapp.extensions import submit_once

from . import lean, nonce
from .pages import NO_TOKEN, form_page, validate_and_place

baseline = Blueprint("baseline", __name__, url_prefix="/baseline")
floor = Blueprint("floor", __name__, url_prefix="/floor")


def create_app() -> Flask:
    """The real app (configured from the environment) with the variants beside it."""
    app = webapp.create_app()
    for blueprint in (baseline, floor, nonce.bp):
        app.register_blueprint(blueprint)
    lean.mount(app)
    return app


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
