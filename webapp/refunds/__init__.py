"""Refunds: requested on the order page, queued on a Redis Stream, applied once
by an asyncio worker (``python -m webapp.refunds.worker``; see worker.py for
the delivery guarantees).

    stream.py    the message and the producer (XADD)
    views.py     the refund form's once-only submit (blueprint)
    forms.py     RefundForm
    effect.py    the refund transaction (UNIQUE key, CHECK on the order)
    worker.py    the consumer-group worker: claim, apply, ack, dead-letter
    settings.py  the worker's environment
    cli.py       reconcile-refunds, refund-dead-letters
"""

from __future__ import annotations

from flask import Flask

__all__ = ["init_app"]


def init_app(app: Flask) -> None:
    """Register the refund form's blueprint and the operator commands."""
    from . import cli  # noqa: F401 - defines the commands on the blueprint
    from .views import bp

    app.register_blueprint(bp)
