"""The sweeper in the refund worker's process: every ``CHARGE_SWEEP_SECONDS`` it finishes
the card charges that submits left to do (``SubmitOnce.resume``, what ``flask --app webapp
submit-once resume`` runs from cron), so an order whose customer went away is still paid
or declined within a minute. Two workers sweeping at once skip each other's rows: a row's
lock is held by whoever is charging it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from flask import Flask

from ..extensions import submit_once

__all__ = ["sweep_while_running"]

log = logging.getLogger("webapp.payments.sweeper")


async def sweep_while_running(
    stop: asyncio.Event, seconds: float, make_app: Callable[[], Flask] | None = None
) -> None:
    """Resume the steps left to do every ``seconds`` (0: never) until ``stop`` is set, in an
    app of its own made by ``make_app`` (default: the shop's, from the environment), each
    sweep in a thread: the step calls the provider and PostgreSQL synchronously."""
    if seconds <= 0:
        return
    try:
        app = await asyncio.to_thread(make_app or _shop)
    # its settings are incomplete: refunds still go on
    except RuntimeError as error:
        log.error("charge sweeper not started: %s", error)
        return
    while not stop.is_set():
        try:
            counts = await asyncio.to_thread(_sweep, app)
        # the database away, say: the next sweep tries again
        except Exception as error:
            log.warning(
                "charge sweep failed (%s); trying again in %g s", type(error).__name__, seconds
            )
        else:
            if counts:
                log.info(
                    "charge sweep: %s",
                    " ".join(f"{kind}={n}" for kind, n in sorted(counts.items())),
                )
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


def _shop() -> Flask:
    # the worker imports the app only when it sweeps
    from .. import create_app

    return create_app()


def _sweep(app: Flask) -> dict[str, int]:
    with app.app_context():
        return submit_once.resume()
