"""Refunds: requested on the order page as a row (reserved on the order), published
to a Redis Stream by an outbox relay, applied once by an asyncio worker
(``python -m webapp.refunds.worker``; see worker.py for the delivery guarantees).

    requests.py  the refund request row and its reservation (the submit's transaction);
                 on a shipped order it waits for review
    views.py     the refund form's once-only submit (blueprint)
    forms.py     RefundForm
    stream.py    the message and the stream's keys
    relay.py     the outbox relay: committed requests -> XADD (a task in the worker)
    effect.py    the refund transaction: only what a request row says (UNIQUE key,
                 reservation -> refunded, CHECK); a message with no row is forged
    outcomes.py  what came of a delivery: applied, already, forged, rejected, failed, review
    worker.py    the consumer-group worker: claim, apply, ack, dead-letter
    trim.py      XTRIM MINID past what every group has acked (a task in the worker)
    dead_letters.py  the dead-letter stream; the reason in plain words
    settings.py  the worker's environment
    cli.py       refunds reconcile, refunds dead-letters [--requeue]
    reviews.py   refunds reviews, refunds approve, refunds reject (refunds after shipping)
"""

from __future__ import annotations

from flask import Flask

__all__ = ["init_app"]


def init_app(app: Flask) -> None:
    """Register the refund form's blueprint and the ``flask refunds`` commands."""
    from . import reviews  # noqa: F401 - adds its commands to the group
    from .cli import refunds
    from .views import bp

    app.register_blueprint(bp)
    app.cli.add_command(refunds)
