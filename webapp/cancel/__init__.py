"""Cancelling an order from its confirmation page, once (see views.py).

A package of its own, beside refunds/, rather than inside orders/: it is its
own blueprint with its own form and token, acting on an order that exists,
as a refund does; orders/ is about placing one.
"""

from __future__ import annotations

from flask import Flask

from .views import bp, cancellable

__all__ = ["init_app"]


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
    app.jinja_env.globals["cancellable"] = cancellable
