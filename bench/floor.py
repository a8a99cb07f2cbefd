"""The floor: the baseline plus the two Redis commands any store-backed token costs.

    render   SET floor:<token> 1 EX 3600 NX
    submit   GETDEL floor:<token>  -> validate -> INSERT -> COMMIT

No session binding, no limits, no lock, no digest, no signals: only the two
round trips, sent the way the token layer sends its own (a connection taken from
a short list and put back, on the app's Redis client's pool). What the
token layer costs above this is ours to cut; what this costs above the baseline
is the price of asking Redis at all, on this machine. Mounted under /floor by
bench/app.py for the benchmark only.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, abort, request

# The token layer's own way of sending a command; private, used here only so the
# floor pays exactly what the token layer pays per command.
from submit_once.tokens import _Connections
from webapp.extensions import form_tokens

from .baseline import form_page, validate_and_place

bp = Blueprint("floor", __name__, url_prefix="/floor")
_connections: _Connections | None = None


def command(*args: str | int) -> object:
    global _connections
    if _connections is None:  # in the worker process, with the app's client
        _connections = _Connections(form_tokens.redis.connection_pool)
    return _connections.execute(*args)


@bp.get("/orders/new")
def new():
    token = secrets.token_urlsafe(32)
    command("SET", f"floor:{token}", 1, "EX", 3600, "NX")
    return form_page(token)


@bp.post("/orders")
def create():
    token = request.form.get("form_token", "")
    if command("GETDEL", f"floor:{token}") is None:
        abort(409)
    return validate_and_place(token)
