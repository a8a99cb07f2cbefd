"""Kill and pause points around the checkout's card charge, for tests that drive gunicorn
(tests/support/paused_app.py): the app's provider client (``app.extensions["payments"]``, the
seam the shop offers) wrapped so that it can stop just before the call and just after
the answer, and say who made each call.

    TEST_KILL_AFTER_CONSUME=p     SIGKILL this worker with probability p right after the
    TEST_KILL_AFTER_COMMIT=p      token was spent / the order's row committed (before its
    TEST_KILL_BEFORE_CHARGE=p     charge) / just before the provider call / after the
    TEST_KILL_AFTER_CHARGE=p      provider answered, before the answer is recorded
    TEST_PAUSE_BEFORE_CHARGE=s    announced pauses (tests.pauses.announced_pause) there
    TEST_PAUSE_AFTER_CHARGE=s
    TEST_KILL_ONCE=path           kill only once across every process: the kill that
                                  creates this file happens, later ones do not
    TEST_CHARGE_LOG=path          one JSON line per charge call: key, who made it ("first":
                                  the submit that made the order, "duplicate": a repeat of
                                  it, "sweeper"), whether it was answered, the charge
"""

from __future__ import annotations

import json
import os
import random
import signal
from typing import Any

from flask import Flask, g, has_request_context

from flask_submit_once.signals import submit_committed, token_consumed
from tests.support.pauses import announced_pause

__all__ = ["install"]


def _kill_sometimes(probability: float) -> None:
    if not probability or random.random() >= probability:
        return
    once = os.environ.get("TEST_KILL_ONCE")
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    os.kill(os.getpid(), signal.SIGKILL)


class HookedProvider:
    """The app's provider client, with hooks around ``charge``; everything else as is."""

    def __init__(self, client: Any, environ: dict[str, str]) -> None:
        self.client, self.environ = client, environ
        self.log = environ.get("TEST_CHARGE_LOG")
        self.pauses = {
            where: announced_pause(
                f"{where.lower()}-charge", float(environ[f"TEST_PAUSE_{where}_CHARGE"])
            )
            for where in ("BEFORE", "AFTER")
            if environ.get(f"TEST_PAUSE_{where}_CHARGE")
        }

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def charge(self, **kwargs: Any) -> Any:
        self._point("BEFORE")
        caller = g.get("charge_caller", "duplicate") if has_request_context() else "sweeper"
        try:
            done = self.client.charge(**kwargs)
        except Exception as error:
            self._write(kwargs["key"], caller, type(error).__name__, None)
            raise
        self._write(kwargs["key"], caller, "charged", done.id)
        self._point("AFTER")
        return done

    def _point(self, where: str) -> None:
        if where in self.pauses:
            self.pauses[where]()
        _kill_sometimes(float(self.environ.get(f"TEST_KILL_{where}_CHARGE") or 0))

    def _write(self, key: str, caller: str, outcome: str, charge: str | None) -> None:
        if self.log:
            line = json.dumps(
                {
                    "key": key,
                    "caller": caller,
                    "outcome": outcome,
                    "charge": charge,
                    "pid": os.getpid(),
                }
            )
            # one short write: lines never interleave
            with open(self.log, "a") as file:
                file.write(line + "\n")


def install(app: Flask, environ: dict[str, str] | None = None) -> Flask:
    """Wrap ``app``'s provider client and connect the kill points the environment asks for."""
    environ = dict(os.environ if environ is None else environ)
    if "payments" in app.extensions:
        app.extensions["payments"] = HookedProvider(app.extensions["payments"], environ)

    def consumed(sender: Any, **_: Any) -> None:
        # this request made the order: its charge is the first
        g.charge_caller = "first"
        _kill_sometimes(float(environ.get("TEST_KILL_AFTER_CONSUME") or 0))

    def committed(sender: Any, **_: Any) -> None:
        _kill_sometimes(float(environ.get("TEST_KILL_AFTER_COMMIT") or 0))

    token_consumed.connect(consumed, sender=app, weak=False)
    submit_committed.connect(committed, sender=app, weak=False)
    return app
