"""The strongest alternative without Redis: a server-signed nonce and the UNIQUE column.

    render   hidden field = nonce . issued . HMAC(secret, nonce, session, form, issued)
    submit   check the signature and the age -> validate -> INSERT with the nonce's
             digest in the UNIQUE column -> COMMIT
             a duplicate's INSERT waits on the first one's uncommitted row, then
             fails on the constraint: read the first order and land on it

The signature refuses forged, foreign (another session or form) and expired
forms, with no server-side state at all. What it cannot do without a store:
gate a side effect that is not this one INSERT, revoke or limit issued forms,
or answer a duplicate without a write (each one attempts the INSERT and holds a
connection while the first is uncommitted). Mounted under /nonce by bench/app.py
for the benchmark only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from flask import Blueprint, abort, current_app, redirect, request, session, url_for
from sqlalchemy.exc import IntegrityError

from webapp.extensions import submit_once
from webapp.orders.views import order_form
from webapp.shop.models import Order
from webapp.shop.notices import ALREADY_PLACED, notify

from .pages import form_page, place

bp = Blueprint("nonce", __name__, url_prefix="/nonce")

FORM = "order"
TTL = 3600
_SESSION_KEY = "_nonce_sid"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _session_id() -> str:
    sid = session.get(_SESSION_KEY)
    if not isinstance(sid, str):
        sid = session[_SESSION_KEY] = secrets.token_urlsafe(16)
    return sid


def _mac(nonce: str, issued: str) -> str:
    key = current_app.config["SECRET_KEY"].encode()
    message = "\x00".join((nonce, _session_id(), FORM, issued)).encode()
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


def issue() -> str:
    """A signed form token: no server-side state."""
    nonce, issued = secrets.token_urlsafe(32), str(int(time.time()))
    return f"{nonce}.{issued}.{_mac(nonce, issued)}"


def verified_digest(token: str) -> str:
    """The digest for the UNIQUE column; 400 for a forged, foreign or expired form."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        abort(400)
    nonce, issued, mac = parts
    if (
        not hmac.compare_digest(mac, _mac(nonce, issued))
        or not 0 <= time.time() - int(issued) < TTL
    ):
        abort(400)
    material = "\x00".join((FORM, _session_id(), nonce)).encode()
    return _b64(hashlib.sha256(material).digest())[:43]


@bp.get("/orders/new")
def new():
    return form_page(issue())


@bp.post("/orders")
def create():
    token = request.form.get("form_token", "")
    digest = verified_digest(token)
    form = order_form()
    if not form.validate():
        return form_page(token, form, 422)
    try:
        placed = place(form, digest)
        return redirect(url_for("orders.show", public_id=placed.public_id), 303)
    # waited for the first INSERT to commit, then lost to it
    except IntegrityError:
        submit_once.session.rollback()
    existing = Order.find_submission(submit_once.session, digest)
    if existing is None:
        abort(409)
    # as the shop tells a repeat
    notify(existing.order_number, ALREADY_PLACED)
    return redirect(url_for("orders.show", public_id=existing.public_id), 303)
