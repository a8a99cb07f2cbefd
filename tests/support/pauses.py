"""Pauses at a submit's critical points, for tests: receivers of the product's signals.

In-process tests call :func:`after_consume`; tests that drive gunicorn ask
:class:`tests.live.LiveServer` for ``TEST_PAUSE_AFTER_CONSUME`` /
``TEST_PAUSE_AFTER_COMMIT`` (seconds), which serves :mod:`tests.support.paused_app`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from blinker import NamedSignal
from flask import Flask

from flask_submit_once.signals import submit_committed, token_consumed

_connected: dict[tuple[int, str], Callable[..., None]] = {}


def after_consume(app: Flask, hook: Callable[[], object] | None) -> None:
    """Run ``hook()`` in ``app``'s submits right after the Redis step handed the
    request its token, before ``create``; ``None`` removes it."""
    _connect(token_consumed, app, hook)


def after_commit(app: Flask, hook: Callable[[], object] | None) -> None:
    """Run ``hook()`` in ``app``'s submits right after the COMMIT; ``None`` removes it."""
    _connect(submit_committed, app, hook)


def _connect(signal: NamedSignal, app: Flask, hook: Callable[[], object] | None) -> None:
    old = _connected.pop((id(app), signal.name), None)
    if old is not None:
        signal.disconnect(old, sender=app)
    if hook is not None:

        def receiver(sender: Any, **_: Any) -> None:
            hook()

        _connected[(id(app), signal.name)] = receiver
        signal.connect(receiver, sender=app, weak=False)


def announced_pause(where: str, seconds: float) -> Callable[[], None]:
    """Print "test hook: paused after <where> in pid N" to stderr (so a test driving
    gunicorn knows which worker to kill, and when), then sleep ``seconds``."""

    def pause() -> None:
        print(f"test hook: paused after {where} in pid {os.getpid()}", file=sys.stderr, flush=True)
        time.sleep(seconds)

    return pause


def pause_from_environ(app: Flask) -> Flask:
    """Connect the pauses ``TEST_PAUSE_AFTER_CONSUME`` / ``_COMMIT`` ask for."""
    for where, connect in (("consume", after_consume), ("commit", after_commit)):
        seconds = float(os.environ.get(f"TEST_PAUSE_AFTER_{where.upper()}") or 0)
        if seconds:
            connect(app, announced_pause(where, seconds))
    return app
