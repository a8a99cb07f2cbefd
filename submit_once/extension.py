"""FormTokens: the single-use token pattern as a small Flask extension.

It wires :mod:`submit_once.tokens` (Redis) and :mod:`submit_once.runner` (the
once-only transaction) into Flask: a Redis client per app, a random id in the
session that tokens are bound to, a Jinja helper for the hidden input, and the
one call a view makes to submit.

    form_tokens = FormTokens(app)            # or form_tokens.init_app(app)

    {{ form_token_input(token) }}            # in the template

    token = form_tokens.submitted_token()    # 400 if absent or malformed
    outcome = form_tokens.submit_once("order", token, sessions=..., create=..., find=...)
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import redis
from blinker import Namespace
from flask import Flask, current_app, request, session
from markupsafe import Markup, escape
from redis.cluster import RedisCluster
from sqlalchemy.orm import Session, sessionmaker
from werkzeug.exceptions import BadRequest, TooManyRequests

from .redis_urls import make_client
from .runner import Outcome, submit_once
from .tokens import TokenStore, is_well_formed

__all__ = ["BadFormToken", "FormTokens", "TooManyForms"]

_signals = Namespace()
#: Sent with ``form`` after a token is issued (metrics count them).
token_issued = _signals.signal("form-token-issued")
#: Sent with ``form``, ``outcome``, ``seconds`` and ``digest`` (safe to log: never
#: the token) when a submit is decided (metrics and the request log listen).
submit_decided = _signals.signal("form-submit-decided")

T = TypeVar("T")
_SESSION_KEY = "_form_tokens_sid"
_WINDOW_KEY = "_form_tokens_issued"  # [window start (epoch s), tokens issued in it]


class BadFormToken(BadRequest):
    """The submitted form token is missing or not the shape we issue."""
    description = (
        "This form was sent without a valid form token, so it could not be processed. "
        "Open the form again and submit it from there."
    )


class TooManyForms(TooManyRequests):
    """This session opened more forms in one TTL window than the cap allows."""
    description = (
        "You have opened this form very many times in a short while, so we are not opening "
        "another one for now. Use a form you already have open, or try again later."
    )


@dataclass
class _State:
    store: TokenStore
    field: str
    wait: float
    redis_down_fallback: bool = False
    max_per_session: int = 0
    after_consume: Callable[[], None] | None = None
    after_commit: Callable[[], None] | None = None


class FormTokens:
    """Per-app state lives in ``app.extensions["form_tokens"]``, never on ``self``."""

    def __init__(self, app: Flask | None = None) -> None:
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        app.config.setdefault("FORM_TOKENS_REDIS_URL", app.config.get("REDIS_URL"))
        app.config.setdefault("FORM_TOKENS_TTL", 3600)
        app.config.setdefault("FORM_TOKENS_PREFIX", "ft")
        app.config.setdefault("FORM_TOKENS_FIELD", "form_token")
        app.config.setdefault("FORM_TOKENS_WAIT", 10.0)
        app.config.setdefault("FORM_TOKENS_REDIS_DOWN_FALLBACK", False)
        app.config.setdefault("FORM_TOKENS_MAX_PER_SESSION", 0)  # 0: no cap
        url = app.config["FORM_TOKENS_REDIS_URL"]
        if not url:
            raise RuntimeError("FormTokens needs FORM_TOKENS_REDIS_URL (or REDIS_URL) set.")
        client = make_client(url)  # redis://, redis+cluster:// or redis+sentinel://
        app.extensions["form_tokens"] = _State(
            store=TokenStore(client, ttl=int(app.config["FORM_TOKENS_TTL"]),
                             prefix=app.config["FORM_TOKENS_PREFIX"]),
            field=app.config["FORM_TOKENS_FIELD"],
            wait=float(app.config["FORM_TOKENS_WAIT"]),
            redis_down_fallback=bool(app.config["FORM_TOKENS_REDIS_DOWN_FALLBACK"]),
            max_per_session=int(app.config["FORM_TOKENS_MAX_PER_SESSION"]),
        )
        app.jinja_env.globals["form_token_input"] = form_token_input

    @staticmethod
    def state() -> _State:
        """This app's token store and settings (RuntimeError if not set up)."""
        try:
            return current_app.extensions["form_tokens"]
        except KeyError:
            raise RuntimeError("FormTokens is not set up: call FormTokens(app) or init_app(app).")\
                from None

    @property
    def store(self) -> TokenStore:
        return self.state().store

    @property
    def redis(self) -> redis.Redis | RedisCluster:
        """This app's Redis client (one pool, shared by threads). The extension
        owns it; hand it to whatever else in the app needs Redis."""
        return self.state().store.client

    def session_id(self) -> str:
        """The random id this browser session's tokens are bound to."""
        sid = session.get(_SESSION_KEY)
        if not isinstance(sid, str):
            sid = session[_SESSION_KEY] = secrets.token_urlsafe(16)
        return sid

    def issue(self, form: str) -> str:
        """A fresh token for one rendering of ``form`` (one Redis SET).

        :class:`TooManyForms` (429) once this session has been issued
        ``FORM_TOKENS_MAX_PER_SESSION`` tokens in the current TTL window.
        """
        self._count_issue()
        token = self.store.issue(session_id=self.session_id(), form=form)
        token_issued.send(current_app._get_current_object(), form=form)
        return token

    def _count_issue(self) -> None:
        # The count lives in the signed session cookie, not in Redis, so the cap
        # costs the happy path no Redis command. Tokens of the previous window
        # may still be live, so a session holds at most 2 x cap live tokens.
        # A client that drops or replays its cookie escapes the count; Redis
        # maxmemory with volatile-ttl is what bounds that (see README).
        cap, ttl = self.state().max_per_session, self.store.ttl
        if cap <= 0:
            return
        now = int(time.time())
        window = session.get(_WINDOW_KEY)
        if not (isinstance(window, list) and len(window) == 2
                and all(isinstance(n, int) for n in window) and 0 <= now - window[0] < ttl):
            window = [now, 0]
        if window[1] >= cap:
            raise TooManyForms(retry_after=window[0] + ttl - now)
        session[_WINDOW_KEY] = [window[0], window[1] + 1]

    def submitted_token(self) -> str:
        """The token in the submitted form; :class:`BadFormToken` (400) if it is
        missing or malformed, before anything touches Redis."""
        values = request.form.getlist(self.state().field)
        if len(values) != 1 or not is_well_formed(values[0]):
            raise BadFormToken()
        return values[0]

    def digest(self, form: str, token: str) -> str:
        """The token's digest (safe to log and to store) as bound to this session."""
        return self.store.digest(token, session_id=self.session_id(), form=form)

    def submit_once(
        self,
        form: str,
        token: str,
        *,
        sessions: sessionmaker[Session],
        create: Callable[[Session, str], T],
        find: Callable[[Session, str], T | None],
    ) -> Outcome[T]:
        """Consume ``token`` and run ``create`` once; see :func:`submit_once.runner.submit_once`."""
        state = self.state()
        started = time.perf_counter()
        outcome = submit_once(
            tokens=state.store, token=token, session_id=self.session_id(), form=form,
            sessions=sessions, create=create, find=find, wait=state.wait,
            redis_down_fallback=state.redis_down_fallback,
            after_consume=state.after_consume, after_commit=state.after_commit,
        )
        submit_decided.send(current_app._get_current_object(), form=form, outcome=outcome,
                            seconds=time.perf_counter() - started,
                            digest=self.digest(form, token))
        return outcome


def form_token_input(token: str) -> Markup:
    """The hidden input that carries ``token``: ``{{ form_token_input(token) }}``."""
    field = current_app.extensions["form_tokens"].field
    return Markup('<input type="hidden" name="{}" value="{}">').format(
        escape(field), escape(token)
    )
