"""The floor: the baseline plus the two Redis commands any store-backed token costs.

    render   SET floor:<token> 1 EX 3600 NX       (the app's own Redis client)
    submit   GETDEL floor:<token>  -> validate -> INSERT -> COMMIT

No session binding, no limits, no lock, no digest, no signals: only the two
round trips, through the same redis-py client the token layer uses. What the
token layer costs above this is ours to cut; what this costs above the baseline
is the price of asking Redis at all, on this machine. Mounted under /floor by
bench/app.py for the benchmark only.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, abort, redirect, render_template, request, url_for

from webapp.db import sessions
from webapp.extensions import form_tokens
from webapp.orders import place_order
from webapp.orders.catalogue import active_products
from webapp.orders.forms import OrderForm

bp = Blueprint("floor", __name__, url_prefix="/floor")


@bp.get("/orders/new")
def new():
    with sessions()() as db:
        form = OrderForm(active_products(db))
    token = secrets.token_urlsafe(32)
    form_tokens.redis.set(f"floor:{token}", 1, ex=3600, nx=True)
    return render_template("orders/new.html", form=form, form_token=token, message=None)


@bp.post("/orders")
def create():
    token = request.form.get("form_token", "")
    if form_tokens.redis.getdel(f"floor:{token}") is None:
        abort(409)
    with sessions()() as db:
        form = OrderForm(active_products(db))
    if not form.validate():
        return render_template("orders/new.html", form=form, form_token=token,
                               message=None), 422
    with sessions()() as db:
        public_id = place_order(db, form, secrets.token_urlsafe(32))
        db.commit()
    return redirect(url_for("orders.show", public_id=public_id), 303)
