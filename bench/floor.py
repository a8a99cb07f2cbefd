"""The floor: the baseline plus the two Redis commands any store-backed token costs.

    render   SET floor:<token> 1 EX 3600 NX
    submit   GETDEL floor:<token>  -> validate -> INSERT -> COMMIT

No session binding, no limits, no lock, no digest, no signals: only the two
round trips, sent through the app's redis-py client (``form_tokens.redis``, the
same client and pool the token store uses) with its public ``set`` and
``getdel``. What the token layer costs above this is ours to cut; what this
costs above the baseline is the price of asking Redis at all, on this machine.
Mounted under /floor by bench/app.py for the benchmark only.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, abort, request

from webapp.extensions import form_tokens

from .baseline import form_page, validate_and_place

bp = Blueprint("floor", __name__, url_prefix="/floor")


@bp.get("/orders/new")
def new():
    token = secrets.token_urlsafe(32)
    form_tokens.redis.set(f"floor:{token}", 1, ex=3600, nx=True)
    return form_page(token)


@bp.post("/orders")
def create():
    token = request.form.get("form_token", "")
    if form_tokens.redis.getdel(f"floor:{token}") is None:
        abort(409)
    return validate_and_place(token)
