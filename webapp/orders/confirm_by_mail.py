"""Confirm through the order's email: how another browser gets to change an order.

An order's details change only from the browser session that placed it
(:func:`~webapp.orders.amending.placed_here`). A customer on another device, or whose
session cookie is gone, asks from the 403 page for a link sent to the order's email
address; opening it there and pressing Confirm lets this browser change the order too.
Holding the order's link is still enough to see what the link showed before (its page,
its cancel, its refund), no more.

    POST /orders/<key>/confirmation-link     send a link (CSRF, 3 an hour an order)
    GET  /orders/<key>/confirm/<token>       the link: a page with a Confirm button
    POST /orders/<key>/confirm/<token>       confirm: the link is used up, this browser
                                             session may change the order

The send answers the same page whether or not a mail went (a rate limit reached, an
order that can no longer change), and shows the address only masked: it tells a link
holder nothing new. The link is signed (itsdangerous, under ``SECRET_KEY``, with this
purpose's salt) and names its order, so it cannot be made up or moved to another order,
and expires after :data:`LINK_SECONDS`; it works once: its nonce's Redis key is taken
with ``GETDEL`` when it is confirmed. Opening it (GET) uses nothing up, so a mail
scanner that fetches links does not spend the customer's. The link is in no log: the
request log names routes, not paths, and nginx logs other paths as ``-``.

What a confirmation grants is kept in the browser's signed session cookie (the last
:data:`~webapp.orders.amending.CONFIRMED_KEPT` orders), the place the session's own
identity lives, and read by :func:`~webapp.orders.amending.placed_here`, the one rule.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import smtplib

from flask import Blueprint, abort, current_app, redirect, render_template, session, url_for
from itsdangerous import BadSignature, URLSafeTimedSerializer
from redis.exceptions import RedisError

from .. import mail
from ..extensions import submit_once
from ..shop.lookup import get_order_or_404
from ..shop.models import Order
from ..shop.notices import CONFIRMED_BY_MAIL, notify
from .amending import CONFIRMED_KEPT, CONFIRMED_ORDERS, why_not_amendable

__all__ = ["LINK_SECONDS", "SENDS_PER_HOUR", "USED_UP", "bp"]

bp = Blueprint("confirm_by_mail", __name__)
log = logging.getLogger(__name__)

#: How long a link works.
LINK_SECONDS = 30 * 60
#: Links sent per order an hour, whoever asks.
SENDS_PER_HOUR = 3
SALT = "webapp.orders.confirm_by_mail"
USED_UP = (
    "This confirmation link has expired or was already used, so nothing changed. Open "
    "the order's page and ask for a new one."
)
#: The mail, plain text (a template would be HTML-escaped, and ship only as .html).
BODY = """Hello {name},

Someone asked to change order {number} from a browser other than the one it was placed
from. If it was you, open this link on that device within {minutes} minutes and press
Confirm:

{link}

The link works once. If it was not you, ignore this mail: nothing changes.

Fernleaf
"""
#: INCR the count; give it the window's TTL on the first of a window.
COUNT = """
local n = redis.call('INCR', KEYS[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""


@bp.post("/orders/<public_id>/confirmation-link")
def send_link(public_id: str):
    """Send a confirmation link to the order's address, if it may be sent; the same
    answer either way."""
    order = get_order_or_404(public_id)
    if mail.enabled() and why_not_amendable(order) is None and _may_send(order):
        try:
            _send(order)
        except (RedisError, OSError, smtplib.SMTPException) as error:
            # The same answer: the customer asks again later (the address is not shown).
            log.warning("order %s: confirmation link not sent: %s", order.order_number, error)
    return render_template(
        "orders/confirmation_sent.html", order=order, address=mail.masked(order.email)
    )


@bp.get("/orders/<public_id>/confirm/<token>")
def open_link(public_id: str, token: str):
    """The link opened: a page with a Confirm button (nothing used up yet)."""
    order = get_order_or_404(public_id)
    nonce = _nonce(token, order)
    if not submit_once.redis.exists(_key(nonce)):
        abort(410, USED_UP)
    return render_template("orders/confirm.html", order=order, token=token)


@bp.post("/orders/<public_id>/confirm/<token>")
def confirm(public_id: str, token: str):
    """Confirm: the link is used up, and this browser session may change the order."""
    order = get_order_or_404(public_id)
    nonce = _nonce(token, order)
    named = submit_once.redis.getdel(_key(nonce))
    if not isinstance(named, str | bytes) or not hmac.compare_digest(
        named if isinstance(named, str) else named.decode(), order.public_id
    ):
        abort(410, USED_UP)
    kept = [one for one in session.get(CONFIRMED_ORDERS, []) if one != order.public_id]
    session[CONFIRMED_ORDERS] = [*kept, order.public_id][-CONFIRMED_KEPT:]
    notify(order.order_number, CONFIRMED_BY_MAIL)
    log.info("order %s: a browser session confirmed through the order's email", order.order_number)
    return redirect(url_for("orders.show", public_id=order.public_id), 303)


def _send(order: Order) -> None:
    nonce = secrets.token_urlsafe(32)
    submit_once.redis.set(_key(nonce), order.public_id, ex=LINK_SECONDS)
    token = _serializer().dumps({"order": order.public_id, "nonce": nonce})
    link = url_for(".open_link", public_id=order.public_id, token=token, _external=True)
    body = BODY.format(
        name=order.customer_name, number=order.order_number, link=link, minutes=LINK_SECONDS // 60
    )
    mail.send(mail.Mail(order.email, f"Confirm changes to order {order.order_number}", body))


def _may_send(order: Order) -> bool:
    """Count one send for ``order``; False past :data:`SENDS_PER_HOUR` an hour, or
    while Redis cannot count (a send nobody can bound is not made)."""
    try:
        count = submit_once.redis.register_script(COUNT)
        sent = int(count(keys=[f"shop:confirm-mail:{order.id}"], args=[3600]))
    except RedisError as error:
        log.warning("confirmation link not sent, Redis unavailable: %s", type(error).__name__)
        return False
    return sent <= SENDS_PER_HOUR


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=SALT)


def _nonce(token: str, order: Order) -> str:
    """The nonce of a link that is signed, not expired, and for ``order``; else 410."""
    try:
        payload = _serializer().loads(token, max_age=LINK_SECONDS)
    except BadSignature:
        abort(410, USED_UP)
    if not isinstance(payload, dict) or payload.get("order") != order.public_id:
        abort(410, USED_UP)
    nonce = payload.get("nonce")
    if not isinstance(nonce, str):
        abort(410, USED_UP)
    return nonce


def _key(nonce: str) -> str:
    """The Redis key of a link's nonce: its digest, so the key names no usable link."""
    return "shop:confirm-link:" + hashlib.sha256(nonce.encode()).hexdigest()
