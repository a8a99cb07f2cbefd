"""``webapp.create_app()`` with the pauses the environment asks for, served by
gunicorn in tests (see tests/support/live.py): ``tests.support.paused_app:create_app()``.

    TEST_PAUSE_AFTER_CONSUME=<seconds>   between GETDEL and the insert
    TEST_PAUSE_AFTER_COMMIT=<seconds>    after the commit, before the response
    TEST_KILL_* / TEST_PAUSE_*_CHARGE / TEST_CHARGE_LOG   around the card charge
                                         (tests/support/charge_hooks.py)

Each pause first prints "test hook: paused after <where> in pid N" to stderr.
These variables mean nothing to the shop itself: only this test factory reads them.
"""

from __future__ import annotations

from flask import Flask

import webapp
from tests.support import charge_hooks
from tests.support.pauses import pause_from_environ


def create_app() -> Flask:
    return charge_hooks.install(pause_from_environ(webapp.create_app()))
