"""Test hooks: pauses at the submit's critical points (APP_ENV=testing only).

``TEST_PAUSE_AFTER_CONSUME`` sleeps between GETDEL and the insert, to put
duplicates in flight or to kill the worker with the token spent and nothing
committed; ``TEST_PAUSE_AFTER_COMMIT`` sleeps after the commit and before the
response, to interrupt a request whose work is done. Each pause first prints
one line to stderr naming the process, so a test driving gunicorn knows which
worker to kill and when. :func:`webapp.config.finish` refuses both outside
testing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from flask import Flask


def init_app(app: Flask) -> None:
    hooks = app.extensions["form_tokens"]
    if seconds := app.config.get("TEST_PAUSE_AFTER_CONSUME"):
        hooks.after_consume = pause("consume", seconds)
    if seconds := app.config.get("TEST_PAUSE_AFTER_COMMIT"):
        hooks.after_commit = pause("commit", seconds)


def pause(where: str, seconds: float) -> Callable[[], None]:
    """A hook that announces itself on stderr, then sleeps ``seconds``."""
    def hook() -> None:
        print(f"test hook: paused after {where} in pid {os.getpid()}", file=sys.stderr,
              flush=True)
        time.sleep(seconds)
    return hook
