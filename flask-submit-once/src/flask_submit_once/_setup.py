"""What :meth:`SubmitOnce.init_app <flask_submit_once.SubmitOnce.init_app>` sets up in an
app besides its state: the settings' defaults, the signer for tokens drawn while Redis is
away, Flask-WTF's time limit, the lost-session handler and the ``submit-once`` commands."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import click
from flask import Flask, Response
from flask.cli import AppGroup
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue

from ._history import BackFriendlySessionInterface
from ._signed import SignedTokens

__all__ = [
    "DEFAULTS",
    "answer_lost_sessions",
    "back_shows_forms",
    "commands",
    "csrf_lives_as_long",
    "read_settings",
    "signed_tokens",
]

#: Every setting, with its default (``SUBMIT_ONCE_`` + the name).
DEFAULTS: Mapping[str, Any] = {
    "TTL": 3600,
    "WAIT_SECONDS": 10.0,
    "MAX_PER_SESSION": 200,
    "MAX_PER_CLIENT_PER_MINUTE": 120,
    "REDIS_DOWN_FALLBACK": False,
    "PREFIX": "so",
    "FIELD": "form_token",
    "BACK_SHOWS_FORM": True,
    "SIGNED_WHEN_REDIS_AWAY": False,
}


def read_settings(app: Flask) -> None:
    """Every ``SUBMIT_ONCE_*`` setting the app did not set gets its default; a setting of
    0.9's (``FORM_TOKENS_*``) stops start-up, naming its new name."""
    old = sorted(key for key in app.config if key.startswith("FORM_TOKENS_"))
    if old:
        raise RuntimeError(f"{old[0]} was renamed: set SUBMIT_ONCE_{old[0][12:]} instead.")
    app.config.setdefault("SUBMIT_ONCE_REDIS_URL", app.config.get("REDIS_URL"))
    for name, default in DEFAULTS.items():
        # A test app's own suite opens many forms from one address.
        fallback = 0 if name == "MAX_PER_CLIENT_PER_MINUTE" and app.testing else default
        app.config.setdefault(f"SUBMIT_ONCE_{name}", fallback)


def back_shows_forms(app: Flask) -> None:
    """Back shows a submitted form as it was (see _history.py): only in place of Flask's
    own session interface, never one the app chose."""
    if (
        app.config["SUBMIT_ONCE_BACK_SHOWS_FORM"]
        and type(app.session_interface) is SecureCookieSessionInterface
    ):
        app.session_interface = BackFriendlySessionInterface()


def commands(resume_steps: Callable[..., dict[str, int]]) -> AppGroup:
    """``flask submit-once resume``: the sweeper, for cron or a worker."""
    group = AppGroup("submit-once", help="Flask-Submit-Once's commands.")

    @group.command("resume")
    @click.option(
        "--wait",
        default=0.0,
        show_default=True,
        help="Seconds to wait for a row a request is working on.",
    )
    def resume(wait: float) -> None:
        """Do the steps outside the database that submits left to do."""
        counts = resume_steps(wait=wait)
        click.echo(" ".join(f"{kind}={n}" for kind, n in sorted(counts.items())) or "nothing")

    return group


def signed_tokens(app: Flask, ttl: int) -> SignedTokens | None:
    if not app.config["SUBMIT_ONCE_SIGNED_WHEN_REDIS_AWAY"]:
        return None
    if not app.secret_key:
        raise RuntimeError(
            "SUBMIT_ONCE_SIGNED_WHEN_REDIS_AWAY signs tokens with the app's "
            "secret key: set SECRET_KEY before init_app."
        )
    return SignedTokens(app.secret_key, ttl)


def csrf_lives_as_long(app: Flask, ttl: int) -> None:
    """A CSRF token should live as long as the form token it travels with. A limit the
    app set is its own: kept, with a warning if shorter (CSRFProtect.init_app sets 3600
    itself: with a longer TTL, init this extension first, or set the limit)."""
    limit = app.config.setdefault("WTF_CSRF_TIME_LIMIT", ttl)
    if limit is not None and int(limit) < ttl:
        warnings.warn(
            f"WTF_CSRF_TIME_LIMIT ({limit} s) is shorter than SUBMIT_ONCE_TTL "
            f"({ttl} s): a form open longer fails Flask-WTF's check although its "
            "form token is still good. Set both to one value.",
            stacklevel=4,
        )


def answer_lost_sessions(
    app: Flask,
    session_lost: Callable[[Exception], Response | None],
) -> None:
    """Answer Flask-WTF's CSRFError on protected forms, unless the app answers it itself."""
    try:
        from flask_wtf.csrf import CSRFError  # type: ignore[import-untyped]
    except ImportError:
        return
    if CSRFError in app.error_handler_spec.get(None, {}).get(400, {}):
        return

    def lost(error: Exception) -> ResponseReturnValue:
        return session_lost(error) or error  # type: ignore[return-value]

    app.register_error_handler(CSRFError, lost)
