"""FormTokens: the single-use token pattern as a small Flask extension.

It wires :mod:`submit_once.tokens` (Redis) and :mod:`submit_once.runner` (the
once-only transaction) into Flask: a Redis client per app, a random id in the
session that tokens are bound to, a Jinja helper for the hidden input, and the
one call a view makes to submit::

    form_tokens = FormTokens(app)            # or form_tokens.init_app(app)

    {{ form_token_input(token) }}            # in the template

    token = form_tokens.submitted_token()    # 400 if absent or malformed
    known = form_tokens.already_submitted("order", token)  # optional: before validation
    outcome = form_tokens.submit_once("order", token, sessions=db, create=..., find=...)

Settings (``app.config``), all optional but a Redis URL or client::

    FORM_TOKENS_REDIS_URL            default: REDIS_URL
    FORM_TOKENS_TTL                  3600 (seconds); WTF_CSRF_TIME_LIMIT defaults to it
    FORM_TOKENS_WAIT_SECONDS         10.0: how long a duplicate waits for the first
    FORM_TOKENS_MAX_PER_SESSION      200: tokens per session per TTL window (0: no cap)
    FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE  120: tokens per client address a minute
                                     (0: no limit), counted in Redis with the token's SET
    FORM_TOKENS_REDIS_DOWN_FALLBACK  False: Redis away at GETDEL -> the database decides
    FORM_TOKENS_PREFIX               "ft": the Redis key namespace
    FORM_TOKENS_FIELD                "form_token": the hidden input's name
    FORM_TOKENS_BACK_SHOWS_FORM      True: Back shows a submitted form as it was (history.py)
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from flask import Flask, current_app, request, session
from flask.sessions import SecureCookieSessionInterface
from markupsafe import Markup
from sqlalchemy.orm import Session
from werkzeug.exceptions import BadRequest, Forbidden, TooManyRequests

from .forms import OnceForm
from .history import BackFriendlySessionInterface
from .runner import (
    Changed,
    Created,
    Duplicate,
    Outcome,
    Sessions,
    Unavailable,
    restore,
    submit_once,
)
from .signals import submit_decided, token_issued
from .tokens import (
    IssueLimit,
    RedisClient,
    TokenStore,
    TooManyIssued,
    _client_for,
    is_well_formed,
)

__all__ = ["TOKEN_HEADER", "BadFormToken", "FormTokens", "FormTokensState", "NotANavigation",
           "TooManyForms", "TooManyFormsFromClient", "form_token_input"]

T = TypeVar("T")
_SESSION_KEY = "_form_tokens_sid"
#: Tokens a session was issued before it had an id, counted with its next page.
_UNCOUNTED_KEY = "_form_tokens_uncounted"
#: The header a script may send the token in instead of the form field.
TOKEN_HEADER = "X-Form-Token"
#: Settings renamed since earlier versions: using one stops start-up, naming the new one.
_RENAMED = {"FORM_TOKENS_WAIT": "FORM_TOKENS_WAIT_SECONDS"}
#: The issuance caps a new app gets: generous for people, tight for a flood.
DEFAULT_MAX_PER_SESSION = 200
DEFAULT_MAX_PER_CLIENT_PER_MINUTE = 120
#: Settled submits remembered per process for :meth:`FormTokens.already_submitted`
#: (about 200 bytes each).
_SETTLED_SIZE = 4096


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


class NotANavigation(Forbidden):
    """Another site's page asked for this form without navigating to it (an ``<img>``,
    a script): no token is issued and nothing is counted, so a page elsewhere cannot
    spend a visitor's form limit or fill Redis in their name."""
    description = (
        "This form opens when you go to its page, not from inside another site. "
        "Open it from our site."
    )


class TooManyFormsFromClient(TooManyRequests):
    """This client address opened more forms this minute than the limit allows."""
    description = (
        "Very many forms were opened from your network in the last minute, so we are not "
        "opening another one just now. Please wait a minute and try again."
    )


class _Settled:
    """Digests of submits this process saw committed, and their results with the
    fingerprint stored beside each: at most ``size`` of them, the oldest forgotten
    first. Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._results: OrderedDict[str, tuple[Any, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, digest: str, result: tuple[Any, str | None]) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._results[digest] = result
            self._results.move_to_end(digest)
            if len(self._results) > self.size:
                self._results.popitem(last=False)

    def get(self, digest: str) -> tuple[Any, str | None] | None:
        with self._lock:
            return self._results.get(digest)


@dataclass(frozen=True)
class FormTokensState:
    """One app's form-token store and settings, made by :meth:`FormTokens.init_app`
    and kept in ``app.extensions["form_tokens"]``."""
    store: TokenStore
    field: str
    wait: float
    redis_down_fallback: bool = False
    max_per_session: int = 0
    max_per_client_per_minute: int = 0
    # Submits this process saw settled (the fast path of already_submitted): not a setting.
    _settled: _Settled = dataclasses.field(default_factory=lambda: _Settled(_SETTLED_SIZE),
                                           init=False, repr=False)


class FormTokens:
    """The Flask extension: ``FormTokens(app)``, or ``FormTokens()`` then
    :meth:`init_app`. Per-app state lives in ``app.extensions["form_tokens"]``
    (a :class:`FormTokensState`), never on ``self``.

    :param client: a ready ``redis.Redis`` or ``RedisCluster`` to use instead of
        one made from ``FORM_TOKENS_REDIS_URL``; given here without an app, it is
        what every later :meth:`init_app` uses unless that call names its own.
    """

    def __init__(self, app: Flask | None = None, *, client: RedisClient | None = None) -> None:
        self._client = client  # a default for init_app, not per-app state
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, *, client: RedisClient | None = None) -> None:
        """Read the ``FORM_TOKENS_*`` settings and make this app's Redis client
        (or use ``client``, a ready ``redis.Redis`` or ``RedisCluster``)."""
        client = client if client is not None else self._client
        for old, new in _RENAMED.items():
            if old in app.config:
                raise RuntimeError(f"{old} was renamed: set {new} instead.")
        app.config.setdefault("FORM_TOKENS_REDIS_URL", app.config.get("REDIS_URL"))
        app.config.setdefault("FORM_TOKENS_TTL", 3600)
        app.config.setdefault("FORM_TOKENS_WAIT_SECONDS", 10.0)
        app.config.setdefault("FORM_TOKENS_MAX_PER_SESSION", DEFAULT_MAX_PER_SESSION)
        app.config.setdefault("FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE",
                              DEFAULT_MAX_PER_CLIENT_PER_MINUTE)
        app.config.setdefault("FORM_TOKENS_REDIS_DOWN_FALLBACK", False)
        app.config.setdefault("FORM_TOKENS_PREFIX", "ft")
        app.config.setdefault("FORM_TOKENS_FIELD", "form_token")
        app.config.setdefault("FORM_TOKENS_BACK_SHOWS_FORM", True)
        ttl = int(app.config["FORM_TOKENS_TTL"])
        if client is None:
            client = make_client(app.config["FORM_TOKENS_REDIS_URL"])
        app.extensions["form_tokens"] = FormTokensState(
            store=TokenStore(client, ttl=ttl, prefix=app.config["FORM_TOKENS_PREFIX"]),
            field=app.config["FORM_TOKENS_FIELD"],
            wait=float(app.config["FORM_TOKENS_WAIT_SECONDS"]),
            redis_down_fallback=bool(app.config["FORM_TOKENS_REDIS_DOWN_FALLBACK"]),
            max_per_session=int(app.config["FORM_TOKENS_MAX_PER_SESSION"]),
            max_per_client_per_minute=int(app.config["FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE"]),
        )
        # A CSRF token should live as long as the form token it travels with: a
        # shorter limit fails forms whose token is still good. A limit the app set is
        # its own: kept, with a warning if shorter. CSRFProtect.init_app sets 3600
        # itself, so with a longer TTL call this init_app first (or set the limit).
        csrf_limit = app.config.setdefault("WTF_CSRF_TIME_LIMIT", ttl)
        if csrf_limit is not None and int(csrf_limit) < ttl:
            warnings.warn(
                f"WTF_CSRF_TIME_LIMIT ({csrf_limit} s) is shorter than FORM_TOKENS_TTL "
                f"({ttl} s): a form open longer than the CSRF limit fails Flask-WTF's "
                "check although its form token is still good. Set both to one value.",
                stacklevel=2)
        app.jinja_env.globals["form_token_input"] = form_token_input
        # Back shows a submitted form as it was, with its spent token (see history.py);
        # only in place of Flask's own session interface, never one the app chose.
        if (app.config["FORM_TOKENS_BACK_SHOWS_FORM"]
                and type(app.session_interface) is SecureCookieSessionInterface):
            app.session_interface = BackFriendlySessionInterface()

    @staticmethod
    def state(app: Flask | None = None) -> FormTokensState:
        """``app``'s token store and settings (default: the current app)."""
        state = (app or current_app).extensions.get("form_tokens")
        if not isinstance(state, FormTokensState):
            raise RuntimeError("FormTokens is not set up on this app: call FormTokens(app) "
                               "or form_tokens.init_app(app) in the app factory.")
        return state

    @property
    def store(self) -> TokenStore:
        return self.state().store

    @property
    def redis(self) -> RedisClient:
        """This app's Redis client (one pool, shared by threads). The extension
        owns it; hand it to whatever else in the app needs Redis."""
        return self.state().store.client

    def session_id(self) -> str:
        """The random id this browser session's tokens are bound to."""
        sid = session.get(_SESSION_KEY)
        if not isinstance(sid, str):
            sid = session[_SESSION_KEY] = secrets.token_urlsafe(16)
        return sid

    def issue(self, form: str, *, per_client_per_minute: int | None = None) -> str:
        """A fresh token for one rendering of ``form`` (one Redis round trip).

        :class:`TooManyForms` (429) once this session has been issued
        ``FORM_TOKENS_MAX_PER_SESSION`` tokens in the current TTL window;
        :class:`TooManyFormsFromClient` (429) once the client's address (as
        ``request.remote_addr`` gives it: put ProxyFix in front when behind a
        proxy) has been issued ``per_client_per_minute`` tokens this minute
        (default ``FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE``; 0: no limit);
        :class:`~submit_once.Unavailable` if Redis does not answer.
        """
        return self.issue_many((form,), per_client_per_minute=per_client_per_minute)[form]

    def issue_many(self, forms: Sequence[str], *,
                   per_client_per_minute: int | None = None) -> dict[str, str]:
        """A fresh token for each form of one page, ``{form: token}``, in one Redis
        round trip; refused or unavailable as :meth:`issue`, for all of them at once
        (so a page with Redis away says so once, not once per form).

        A cross-site request that is not a navigation (``Sec-Fetch-Site: cross-site``
        and a ``Sec-Fetch-Mode`` other than ``navigate``) is :class:`NotANavigation`
        (403) before Redis is touched. A session that has no id yet (a first view, or a
        client that keeps no cookies) makes no counter in Redis, which would be a new key
        for one page: its tokens are remembered in the session instead and counted with
        its next page, so a session that comes back is capped as exactly as any other.
        """
        if (request.headers.get("Sec-Fetch-Site") == "cross-site"
                and request.headers.get("Sec-Fetch-Mode", "navigate") != "navigate"):
            raise NotANavigation()
        state = self.state()
        new_session = not isinstance(session.get(_SESSION_KEY), str)
        sid = self.session_id()
        per_client = state.max_per_client_per_minute if per_client_per_minute is None \
            else per_client_per_minute
        # Both counts ride in the SET's one command. The session's window is the
        # TTL: tokens of the previous window may still be live, so a session holds
        # at most 2 x cap live tokens.
        uncounted = session.get(_UNCOUNTED_KEY, 0)
        session_cap = IssueLimit(f"session:{sid}", 0 if new_session else state.max_per_session,
                                 state.store.ttl,
                                 uncounted=uncounted if isinstance(uncounted, int) else 0)
        client_limit = IssueLimit(f"client:{client_network(request.remote_addr)}", per_client, 60)
        try:
            tokens = state.store.issue_many(session_id=sid, forms=forms,
                                            limits=(session_cap, client_limit))
        except TooManyIssued as refused:
            if refused.limit is session_cap:
                raise TooManyForms(retry_after=refused.retry_after) from None
            raise TooManyFormsFromClient(retry_after=refused.retry_after) from None
        except redis.RedisError as error:
            raise Unavailable(f"{type(error).__name__} while issuing a token") from error
        if new_session and state.max_per_session > 0:
            session[_UNCOUNTED_KEY] = len(forms)
        elif session_cap.uncounted:
            session.pop(_UNCOUNTED_KEY, None)  # in the counter now
        if token_issued.receivers:
            app = current_app._get_current_object()  # type: ignore[attr-defined]
            for form in forms:
                token_issued.send(app, form=form)
        return dict(zip(forms, tokens, strict=True))

    def submitted_token(self) -> str:
        """The token this request carries; :class:`BadFormToken` (400) if it is
        missing, repeated or malformed, before anything touches Redis.

        Read from the form field (``FORM_TOKENS_FIELD``), else the ``X-Form-Token``
        header, else that field of a JSON object body: a plain POST, htmx and a
        ``fetch()`` of JSON all work.
        """
        field = self.state().field
        values = request.form.getlist(field)
        if not values and TOKEN_HEADER in request.headers:
            values = request.headers.getlist(TOKEN_HEADER)
        if not values and request.is_json:
            body = request.get_json(silent=True)
            if isinstance(body, dict) and field in body:
                values = [body[field]]
        if len(values) != 1 or not is_well_formed(values[0]):
            raise BadFormToken()
        return str(values[0])

    def form(self, name: str, *, template: str, fragment: str | None = None,
             fields: Sequence[str] = (),
             fingerprint_of: Callable[[Any], str | None] | None = None,
             sessions: Sessions | None = None, with_forms: Sequence[str] = (),
             messages: Mapping[str, str] | None = None) -> OnceForm[Any]:
        """A handle on one protected form that answers every outcome by itself; see
        :class:`~submit_once.OnceForm` for the parameters. Made once, at import time
        or in the app factory: it holds no app state."""
        return OnceForm(self, name, template=template, fragment=fragment, fields=fields,
                        fingerprint_of=fingerprint_of, sessions=sessions,
                        with_forms=with_forms, messages=messages)

    def digest(self, form: str, token: str) -> str:
        """The token's digest (safe to log and to store) as bound to this session."""
        return self.store.digest(token, session_id=self.session_id(), form=form)

    def submit_once(
        self,
        form: str,
        token: str,
        *,
        sessions: Sessions,
        create: Callable[[Session, str], T],
        find: Callable[[Session, str], T | None],
        fingerprint: str | None = None,
        fingerprint_of: Callable[[T], str | None] | None = None,
    ) -> Outcome[T]:
        """Consume ``token`` and run ``create`` once; see :func:`submit_once.submit_once`
        (``fingerprint`` and ``fingerprint_of`` too: a repeat with other input is
        :class:`~submit_once.Changed`).

        ``sessions`` is a ``sessionmaker`` or a Flask-SQLAlchemy ``db`` (pass the
        ``SQLAlchemy`` object itself, not ``db.session`` nor its factory: the
        runner then uses the request's session without closing it, and ends its
        transaction first so a waiting duplicate holds no connection).
        Raises :class:`~submit_once.runner.Unavailable` if Redis or PostgreSQL
        does not answer before the token is spent. On
        :class:`~submit_once.runner.Unconfirmed` the token is put back (see
        :meth:`restore`): answer with the same token, never a fresh one. The signals it sends
        (``token_consumed``, ``submit_committed``, ``submit_decided``) have the
        app as sender.
        """
        state = self.state()
        app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        started = time.perf_counter()
        sid = self.session_id()
        outcome = submit_once(
            tokens=state.store, token=token, session_id=sid, form=form,
            sessions=sessions, create=create, find=find, wait=state.wait,
            redis_down_fallback=state.redis_down_fallback, sender=app,
            fingerprint=fingerprint, fingerprint_of=fingerprint_of,
        )  # puts the token back itself on Unconfirmed
        digest = state.store.digest(token, session_id=sid, form=form)
        if isinstance(outcome, Created | Duplicate):
            # What this request sent is what the result holds (a Duplicate's stored
            # fingerprint matched it): nothing is read from the result, which may be
            # an ORM object whose session has closed.
            state._settled.remember(digest, (outcome.result, fingerprint))
        if submit_decided.receivers:
            submit_decided.send(app, form=form, outcome=outcome,
                                seconds=time.perf_counter() - started, digest=digest)
        return outcome

    def restore(self, form: str, token: str) -> None:
        """Put a spent token back after :class:`~submit_once.Unconfirmed`; see
        :func:`submit_once.restore`. :meth:`submit_once` does it by itself."""
        restore(self.store, token, session_id=self.session_id(), form=form)

    def already_submitted(self, form: str, token: str, *, fingerprint: str | None = None,
                          ) -> Duplicate[Any] | Changed[Any] | None:
        """The outcome for a token whose submit this process has already seen
        committed, or ``None``: then call :meth:`submit_once` as usual. With the
        ``fingerprint`` of this request, a repeat with other input is
        :class:`~submit_once.Changed`, as on the full path.

        A view may ask this before it validates the form: the token is spent and
        its row committed, so a duplicate (a double click, a storm of retries) is
        answered without validation or the database, while a first submit pays
        one dictionary lookup. Only what this worker process saw is known
        (bounded, most recent first); any other duplicate takes the full path and
        gets the same answer there.
        """
        digest = self.digest(form, token)
        state = self.state()
        known = state._settled.get(digest)
        if known is None:
            return None
        result, stored = known
        # The GETDEL every submit makes: a token that came back in Redis (a
        # failover) is used up here too, not left live. Its answer is known
        # whatever Redis says, so an unreachable Redis changes nothing.
        with suppress(redis.RedisError):
            state.store.consume_digest(digest)
        outcome: Duplicate[Any] | Changed[Any] = Duplicate(result)
        if fingerprint is not None and stored is not None and stored != fingerprint:
            outcome = Changed(result)
        if submit_decided.receivers:
            submit_decided.send(current_app._get_current_object(),  # type: ignore[attr-defined]
                                form=form, outcome=outcome, seconds=0.0, digest=digest)
        return outcome


def client_network(address: str | None) -> str:
    """What the per-client limit counts: an IPv4 address, or an IPv6 address's /64
    (one subscriber's whole prefix: counting each /128 would let one machine have
    2**64 limits)."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # ::ffff:192.0.2.1 is that IPv4 address
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def form_token_input(token: str | None) -> Markup:
    """The hidden input that carries ``token``: ``{{ form_token_input(token) }}``;
    nothing when there is no token (Redis was away when the page was rendered)."""
    if not token:
        return Markup("")
    field = FormTokens.state().field
    return Markup('<input type="hidden" name="%s" value="%s">') % (field, token)  # both escaped


def make_client(url: str | None) -> RedisClient:
    """A client for ``url``. A plain ``redis://``, ``rediss://`` or ``unix://`` URL
    needs nothing more; Cluster and Sentinel URLs need ``redis_urls.py`` beside
    this file (imported only then, so a copy without it works)."""
    if not url:
        raise RuntimeError("FormTokens needs FORM_TOKENS_REDIS_URL (or REDIS_URL) set, "
                           "or a client: FormTokens(app, client=...).")
    if urlsplit(url).scheme in ("redis", "rediss", "unix"):
        return _client_for(url)
    try:
        from . import redis_urls
    except ImportError:
        raise RuntimeError(f"FORM_TOKENS_REDIS_URL {urlsplit(url).scheme}:// needs "
                           "submit_once/redis_urls.py; copy it beside extension.py.") from None
    return redis_urls.make_client(url)
