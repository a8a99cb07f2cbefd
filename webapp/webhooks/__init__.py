"""The payment provider's webhook: ``POST /webhooks/payments``, each event once.

views.py       the blueprint: verify, parse, apply once, log what happened
effect.py      what an event does to the order its payment reference names
event.py       the event body (pydantic)
signatures.py  HMAC-SHA256 signing and checking (standard library only)
"""

from __future__ import annotations

from flask import Flask

from ..extensions import csrf
from ..secret_rules import DEV_WEBHOOK_SECRET as DEV_SECRET
from .views import bp

__all__ = ["DEV_SECRET", "init_app"]


def init_app(app: Flask) -> None:
    if not app.config.get("PAYMENT_WEBHOOK_SECRET") and app.config["APP_ENV"] != "production":
        app.config["PAYMENT_WEBHOOK_SECRET"] = DEV_SECRET
    app.config.setdefault("WEBHOOK_CLAIM_TTL", 86400)
    if int(app.config["WEBHOOK_CLAIM_TTL"]) < 1:
        raise RuntimeError("WEBHOOK_CLAIM_TTL must be at least 1 second.")
    # authenticated by its HMAC signature, not a session
    csrf.exempt(bp)
    app.register_blueprint(bp)
