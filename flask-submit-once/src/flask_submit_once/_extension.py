"""SubmitOnce, the Flask extension: its settings, the Redis client, the app's SQLAlchemy
sessions, and the entry points of the two decorators.

Per-app state lives in ``app.extensions["submit_once"]`` (a :class:`State`); the stages of
a submit (``_form``, ``_idempotent``, ``_runner``, ``_answers``, ``_issuing``) are handed
it by the view functions made here, and never import this module back.

**The Redis client.** ``redis://``, ``rediss://`` (TLS) and ``unix://`` URLs name one
server: the extension makes one client (one pool, bounded waits) for it. For a Redis
Cluster or Sentinel, make the redis-py client yourself (``RedisCluster(...)``,
``Sentinel(...).master_for(...)``) and hand it over: ``SubmitOnce(app, client=...)``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import importlib.util
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast
from urllib.parse import urlsplit

import click
import redis
from flask import Flask, Response, current_app, request
from flask.cli import AppGroup
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue
from sqlalchemy.orm import Session

from ._answers import Message, Outcome, Page, TemplateHelper, log_503
from ._errors import UnavailableError
from ._form import Fields, ProtectedForm, RecentSubmits, carry, token_is_live
from ._idempotent import IdempotentView
from ._issuing import (
    NAME_ATTRIBUTE,
    BackFriendlySessionInterface,
    LimitedTokens,
    LocalLimits,
    SignedTokens,
    form_name,
    tokens_for_page,
)
from ._model import Sessions, SubmissionMixin, request_session, set_up_sessions
from ._runner import Then, resume_all
from ._tokens import RedisClient, TokenStore

__all__ = ["DEFAULTS", "State", "SubmitOnce", "state"]

View = TypeVar("View", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("flask_submit_once")

EXTENSION = "submit_once"
#: Where a protected form's view function keeps its :class:`ProtectedForm`.
_FORM = "_submit_once_form"


# Settings

#: Every setting, with its default (``SUBMIT_ONCE_`` + the name).
DEFAULTS: Mapping[str, Any] = {
    "TTL_SECONDS": 3600,
    "WAIT_SECONDS": 10.0,
    "STEP_LEASE_SECONDS": 30.0,
    "MAX_FORMS_PER_SESSION": 200,
    "MAX_FORMS_PER_CLIENT_PER_MINUTE": 120,
    "REDIS_AWAY_ACCEPT_SUBMITS": False,
    "REDIS_AWAY_SIGN_FORMS": False,
    "KEY_PREFIX": "so",
    "FIELD_NAME": "form_token",
    "BACK_SHOWS_FORM": False,
    "ANSWER_CSRF_ERRORS": True,
    "KEEP_UPLOADS": True,
    "MAX_KEPT_UPLOADS_PER_SESSION": 10,
    "MAX_KEPT_UPLOAD_BYTES": 10 * 1024 * 1024,
}

#: Settings of 0.10 that 1.0 renamed (``SUBMIT_ONCE_`` + the name): set, they stop
#: start-up with the new name, rather than be ignored.
RENAMED: Mapping[str, str] = {
    "TTL": "TTL_SECONDS",
    "MAX_PER_SESSION": "MAX_FORMS_PER_SESSION",
    "MAX_PER_CLIENT_PER_MINUTE": "MAX_FORMS_PER_CLIENT_PER_MINUTE",
    "SIGNED_WHEN_REDIS_AWAY": "REDIS_AWAY_SIGN_FORMS",
    "REDIS_DOWN_FALLBACK": "REDIS_AWAY_ACCEPT_SUBMITS",
    "PREFIX": "KEY_PREFIX",
    "FIELD": "FIELD_NAME",
}

#: Flask-WTF's own default for ``WTF_CSRF_TIME_LIMIT``.
_CSRF_TIME_LIMIT = 3600


def read_settings(app: Flask) -> None:
    """Every ``SUBMIT_ONCE_*`` setting the app did not set gets its default. A setting of
    0.10 that 1.0 renamed, or of 0.9 (``FORM_TOKENS_*``), stops start-up, naming its new
    name."""
    for key in sorted(app.config):
        if key.startswith("FORM_TOKENS_"):
            name = key.removeprefix("FORM_TOKENS_")
        elif key.startswith("SUBMIT_ONCE_") and key.removeprefix("SUBMIT_ONCE_") in RENAMED:
            name = key.removeprefix("SUBMIT_ONCE_")
        else:
            continue
        raise RuntimeError(f"{key} was renamed: set SUBMIT_ONCE_{RENAMED.get(name, name)} instead.")
    app.config.setdefault("SUBMIT_ONCE_REDIS_URL", app.config.get("REDIS_URL"))
    for name, default in DEFAULTS.items():
        # A test app's own suite opens many forms from one address.
        if name == "MAX_FORMS_PER_CLIENT_PER_MINUTE" and app.testing:
            default = 0
        app.config.setdefault(f"SUBMIT_ONCE_{name}", default)


def back_shows_forms(app: Flask) -> None:
    """With ``SUBMIT_ONCE_BACK_SHOWS_FORM``, Back shows a submitted form as it was (see
    _issuing): only in place of Flask's own session interface, never one the app chose."""
    if not app.config["SUBMIT_ONCE_BACK_SHOWS_FORM"]:
        return
    if type(app.session_interface) is SecureCookieSessionInterface:
        app.session_interface = BackFriendlySessionInterface()


def secret_key(app: Flask) -> str | bytes:
    """The app's secret key, which every form token's MAC (and a signed token's
    signature) is made with."""
    if not app.secret_key:
        raise RuntimeError(
            "SubmitOnce proves each form token was issued (a MAC over its session and "
            "form) with the app's secret key: set SECRET_KEY before init_app."
        )
    return app.secret_key


def token_secret(key: str | bytes) -> bytes:
    """The TokenStore's MAC key: derived from the app's secret key for this use alone, so
    that no MAC of the tokens is anything else the app signs."""
    material = key.encode() if isinstance(key, str) else key
    return hmac.new(material, b"flask-submit-once form token MAC", hashlib.sha256).digest()


def signed_tokens(app: Flask, key: str | bytes, ttl: int) -> SignedTokens | None:
    """The signer of tokens for forms drawn while Redis is away, when the app wants them."""
    if not app.config["SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS"]:
        return None
    return SignedTokens(key, ttl)


def warn_if_csrf_ends_first(app: Flask, ttl: int) -> None:
    """A CSRF token should live as long as the form token it travels with. Flask-WTF's
    time limit is the app's to set (this extension writes none of Flask-WTF's settings):
    a warning says when it is shorter than the TTL."""
    if not _has_flask_wtf() or app.config.get("WTF_CSRF_ENABLED") is False:
        return
    limit = app.config.get("WTF_CSRF_TIME_LIMIT", _CSRF_TIME_LIMIT)
    if limit is not None and int(limit) < ttl:
        warnings.warn(
            f"WTF_CSRF_TIME_LIMIT ({limit} s) is shorter than SUBMIT_ONCE_TTL_SECONDS "
            f"({ttl} s): a form open longer fails Flask-WTF's check although its "
            "form token is still good. Set both to one value.",
            stacklevel=4,
        )


def answer_csrf_errors(
    app: Flask,
    session_lost: Callable[[Exception], Response | None],
) -> None:
    """With ``SUBMIT_ONCE_ANSWER_CSRF_ERRORS`` (the default), answer Flask-WTF's
    CSRFError on protected forms, unless the app answers it itself; said once, at INFO."""
    if not app.config["SUBMIT_ONCE_ANSWER_CSRF_ERRORS"] or not _has_flask_wtf():
        return
    from flask_wtf.csrf import CSRFError  # type: ignore[import-untyped]

    if CSRFError in app.error_handler_spec.get(None, {}).get(400, {}):
        return

    def lost(error: Exception) -> ResponseReturnValue:
        return session_lost(error) or error  # type: ignore[return-value]

    app.register_error_handler(CSRFError, lost)
    log.info(
        "Flask-Submit-Once answers Flask-WTF's CSRFError on protected forms "
        "(SUBMIT_ONCE_ANSWER_CSRF_ERRORS = False to answer it yourself)"
    )


def _has_flask_wtf() -> bool:
    return importlib.util.find_spec("flask_wtf") is not None


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


# The Redis client

#: A dead Redis costs a request two seconds, never a hung worker.
TIMEOUTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


def client_for(url: str | None) -> redis.Redis:
    """A client for a one-server ``url``, shared by threads, replies as ``str``."""
    if not url:
        raise RuntimeError(
            "SubmitOnce needs SUBMIT_ONCE_REDIS_URL (or REDIS_URL) set, or a "
            "client: SubmitOnce(app, client=redis.Redis(...))."
        )
    scheme = urlsplit(url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise RuntimeError(
            f"SUBMIT_ONCE_REDIS_URL: {scheme}:// is not a one-server URL "
            "(redis://, rediss://, unix://). For a Cluster or Sentinel, make "
            "the redis-py client and pass it: SubmitOnce(app, client=...)."
        )
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30, **TIMEOUTS)


# One app's state


@dataclass
class State:
    """What :meth:`SubmitOnce.init_app <flask_submit_once.SubmitOnce.init_app>` made for
    one app."""

    app: Flask
    store: TokenStore
    limited_tokens: LimitedTokens
    sessions: Sessions | None
    field: str
    wait: float
    accept_when_redis_away: bool
    #: Signed tokens for forms drawn while Redis is away (SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS).
    signed: SignedTokens | None = None
    recent: RecentSubmits = dataclasses.field(default_factory=RecentSubmits)
    local_limits: LocalLimits = dataclasses.field(default_factory=LocalLimits)
    #: When this process last issued signed tokens because Redis was away (None: it is not).
    degraded_since: float | None = None

    def setting(self, name: str) -> Any:
        """A setting read when it is used, so a test may change it on a live app."""
        return self.app.config[f"SUBMIT_ONCE_{name}"]

    def request_session(self, sessions: Sessions | None, missing: str) -> Session:
        """This request's session from ``sessions`` (a decorator's own), else from the
        extension's; ``missing`` is the error's words when there are none."""
        found = sessions if sessions is not None else self.sessions
        if found is None:
            raise RuntimeError(missing)
        return request_session(found)


def protected_form(view: object) -> ProtectedForm | None:
    """The protected form a view function is, if it is one."""
    protected = getattr(view, _FORM, None)
    return protected if isinstance(protected, ProtectedForm) else None


def state(app: Flask | None = None) -> State:
    """``app``'s (default: the current app's) state; a clear error before init_app."""
    found = (app or current_app).extensions.get(EXTENSION)
    if not isinstance(found, State):
        raise RuntimeError(
            "SubmitOnce is not set up on this app: call SubmitOnce(app) or "
            "submit_once.init_app(app) in the app factory."
        )
    return found


# The extension


def renamed_keywords(renamed: Mapping[str, str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator's keyword of 0.10 that 1.0 renamed is a TypeError naming the new one
    (Python's own would not say what it is called now)."""

    def check(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            for old in sorted(renamed.keys() & kwargs.keys()):
                raise TypeError(
                    f"{method.__name__}({old}=) was renamed {method.__name__}"
                    f"({renamed[old]}=) in Flask-Submit-Once 1.0"
                )
            return method(*args, **kwargs)

        return checked

    return check


class SubmitOnce:
    """The extension: ``submit_once = SubmitOnce(app, sessions=db)``, or ``SubmitOnce()``
    then :meth:`init_app`. Per-app state lives in ``app.extensions["submit_once"]``.

    :param client: a ready ``redis.Redis`` or ``RedisCluster`` (say, for a Cluster or
        Sentinel) instead of one made from ``SUBMIT_ONCE_REDIS_URL``.
    :param sessions: where submits get their SQLAlchemy session: Flask-SQLAlchemy's
        ``db``, a ``sessionmaker`` or a ``scoped_session``.

    Given here without an app, ``client`` and ``sessions`` are what :meth:`init_app`
    uses unless it is given its own.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        client: RedisClient | None = None,
        sessions: Sessions | None = None,
    ) -> None:
        # What init_app uses when it is given none of its own.
        self._client, self._sessions = client, sessions
        if app is not None:
            self.init_app(app)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == "issue":
                raise AttributeError(
                    "SubmitOnce.issue was renamed issue_tokens in Flask-Submit-Once 1.0"
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def init_app(
        self, app: Flask, *, client: RedisClient | None = None, sessions: Sessions | None = None
    ) -> None:
        """Read the ``SUBMIT_ONCE_*`` settings, and make the app's Redis client (or take
        ``client``). The app's ``SECRET_KEY`` must be set first: every form token carries
        a MAC made with a key derived from it."""
        read_settings(app)
        if sessions is None:
            sessions = self._sessions
        set_up_sessions(app, sessions)
        if client is None:
            client = self._client
        key = secret_key(app)
        if client is None:
            client = client_for(app.config["SUBMIT_ONCE_REDIS_URL"])
        store = TokenStore(
            client,
            ttl=int(app.config["SUBMIT_ONCE_TTL_SECONDS"]),
            prefix=app.config["SUBMIT_ONCE_KEY_PREFIX"],
            secret=token_secret(key),
        )
        st = app.extensions[EXTENSION] = State(
            app=app,
            store=store,
            limited_tokens=LimitedTokens(store),
            sessions=sessions,
            field=app.config["SUBMIT_ONCE_FIELD_NAME"],
            wait=float(app.config["SUBMIT_ONCE_WAIT_SECONDS"]),
            accept_when_redis_away=bool(app.config["SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS"]),
            signed=signed_tokens(app, key, store.ttl),
        )
        warn_if_csrf_ends_first(app, store.ttl)
        app.jinja_env.globals["submit_once"] = TemplateHelper(st)
        answer_csrf_errors(app, self.session_lost)
        app.cli.add_command(commands(self.resume))
        back_shows_forms(app)

    @property
    def redis(self) -> RedisClient:
        """The current app's Redis client (one pool, shared by threads): the extension
        owns it; hand it to whatever else in the app needs Redis."""
        return state().store.client

    @property
    def degraded(self) -> bool:
        """Whether this process is drawing forms with signed tokens because Redis was away
        at its last try (``SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS``); False again once Redis
        answers a render."""
        return state().degraded_since is not None

    @property
    def session(self) -> Session:
        """This request's SQLAlchemy session, the one its submit runs in (read a form's
        choices through it, and the submit opens no second one)."""
        return state().request_session(
            None, "SubmitOnce has no sessions: SubmitOnce(app, sessions=...)."
        )

    def token_is_live(self) -> bool:
        """Whether the form token of the submit being validated can still take effect:
        ask it in a validator before something costly or outside the app, such as a card
        checked at a provider, and let validation fail when it is False::

            def validate_card(self, field):
                if not submit_once.token_is_live():
                    raise ValidationError("spent")  # never shown
                self.card_token = provider.check(field.data)

        The form's submit is then answered as a repeat of the one that spent the token
        (its result, after waiting while it runs; "changed"; or "expired", input kept
        and a fresh token), never as invalid, and nothing is consumed. One ``EXISTS``,
        sent at most once a request, only when asked: a form whose validators never ask
        costs Redis nothing more. While Redis is away it is an
        :class:`UnavailableError` answer (503, input kept), unless submits are accepted
        then (``SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS``): True, the database decides.

        :raises RuntimeError: outside the validation of a protected form's submit.
        """
        return token_is_live()

    def issue_tokens(self, *endpoints: str) -> None:
        """Issue the tokens of a page's forms (by the endpoints they are sent to) in one
        round trip before its template draws them; without it each
        ``submit_once.input(...)`` issues its own."""
        names = [form_name(endpoint) for endpoint in endpoints]
        try:
            tokens_for_page(state(), names)
        except UnavailableError as error:
            log_503(", ".join(names), "unavailable", error.cause)
            raise

    def carry_token(self, endpoint: str, **values: object) -> str | None:
        """In the view of a step of a form in several steps: draw the form sent to
        ``endpoint`` (the last step's, the one that takes effect) with the token this
        request carries, consuming nothing, so that ``submit_once.input(endpoint)`` on
        this step's page draws it again::

            @app.post("/book/when")
            def choose_day():
                submit_once.carry_token("book")
                details = DetailsForm()
                if not details.validate():
                    return render_template("details.html", form=details), 422
                # The whole booking's form, its first step's fields filled in.
                return render_template("when.html", form=BookingForm())

        The token is issued once for the whole flow, by the first step's page
        (``submit_once.input("book")`` in a form sent to the next step), and carried from
        step to step: Back and Next draw the same token again, so however often the steps
        are gone through, the last step takes effect once. Returns the token, or None when
        it is not this session's and form's (it could never take effect here: the page
        draws a fresh one). :class:`~flask_submit_once.FormTokenError` (400) when the
        request carries none, or a malformed one.

        :param endpoint: the endpoint the last step's form is sent to.
        :param values: the values of its URL, as for ``url_for``.
        """
        return carry(state(), form_name(endpoint, values))

    def key_digest(self, key: str, *, name: str, scope: str = "") -> str:
        """The digest :meth:`idempotent` stores for ``key`` (in the row's
        ``submission_digest``), to find what a key made from elsewhere (a worker, a
        report)::

            row = Payment.find_submission(db, submit_once.key_digest(
                event_id, name="webhook:payments", scope="provider"))

        :param key: the key, as the view's ``key()`` gives it.
        :param name: the view's ``idempotent(name=...)``, else its endpoint (with the
            values of its URL, if it has any, as ``endpoint:name=value``).
        :param scope: what the view's ``scope()`` gives for the caller, if it has one.
        """
        return state().store.digest(key, session_id=scope, form=name)

    @renamed_keywords({"fields": "fingerprint", "answer": "on_outcome"})
    def form(
        self,
        form: Callable[[], Any] | None = None,
        *,
        model: type[SubmissionMixin] | None = None,
        find: Callable[[Session, str], Any] | None = None,
        done: str | Callable[[Any], str] | None = None,
        template: str | None = None,
        fragment: str | None = None,
        result_fragment: str | None = None,
        fingerprint: Fields | None = None,
        messages: Mapping[str, Message] | None = None,
        on_outcome: Callable[[Outcome], ResponseReturnValue | None] | None = None,
        context: Callable[[], Mapping[str, Any]] | None = None,
        wait: float | None = None,
        name: str | None = None,
        sessions: Sessions | None = None,
        then: Then | None = None,
    ) -> Callable[[View], View]:
        """Protect the POST view of a form: it takes effect once per rendering.

        ::

            @app.post("/signup")
            @submit_once.form(SignUpForm, model=Signup, template="signup.html",
                              done="thanks")
            def sign_up(form, db):
                return Signup(email=form.email.data)

        The view runs once per token, with the validated ``form`` and the session ``db``
        its transaction runs in (and the URL's values as keyword arguments), and returns
        the row to add; raise :class:`~flask_submit_once.Refused` to refuse it. The rest
        is done here: the token (400 when malformed), validation (422: the form again,
        input and token kept), the lock, the ``GETDEL``, the row's digest and fingerprint,
        the COMMIT, and every outcome's answer for a plain POST, Turbo, htmx and JSON.

        :param form: makes the form from the request: a Flask-WTF form class, or any
            callable giving an object with ``validate()``, ``errors`` and ``data``; None
            for a form with no fields (a button).
        :param model: the :class:`~flask_submit_once.SubmissionMixin` model the view's
            rows are of: a repeat finds the row by its digest. A view that edits a
            :class:`~flask_submit_once.VersionedMixin` row returns a row recording the
            edit; the row it edits is checked against the version the form carries
            (``submit_once.version_input``): drawn before another edit landed, it is
            ``"stale"`` (409).
        :param find: instead of ``model``, ``find(db, digest)`` gives what the first
            submit made, or None (when a submit changes rows rather than adding one).
        :param done: where the result is shown (303, ``HX-Redirect``, ``Location``): an
            endpoint, its URL values from the result's attributes (else the request's
            URL), or ``done(result) -> url``.
        :param template: the page the form is on, drawn again with ``form`` when the form
            is shown again; None for a form answered only in JSON.
        :param fragment: the part of the page htmx swaps, when it posts the form.
        :param result_fragment: answer htmx in place: this template, with ``result``
            (and a fresh token for the next submit through ``submit_once.input``).
        :param fingerprint: what makes a submission what it is: the names of the fields
            (default: all but CSRF and buttons), or ``fingerprint(form) -> mapping``: a
            repeat with any of it changed is told so (409).
        :param messages: the words, a text or ``words(outcome) -> text``, for a reason the
            form is shown again: ``invalid``, ``changed``, ``expired``, ``refused``, ``stale``,
            ``failed``, ``unconfirmed``, ``still_running``, ``unavailable``,
            ``session_lost``.
        :param on_outcome: ``on_outcome(outcome)`` runs before every default answer:
            return a response to answer that outcome yourself, or None for the default.
        :param context: more template context, ``context() -> mapping``.
        :param wait: seconds a repeat waits for the first submit still running (default
            None: ``SUBMIT_ONCE_WAIT_SECONDS``; 0: answer at once).
        :param name: what tokens are bound to (default: the endpoint and its URL values).
        :param sessions: this form's sessions (a ``sessionmaker``, a ``scoped_session``
            or Flask-SQLAlchemy's ``db``), instead of the extension's.
        :param then: a step outside the database once per submission, after its row's
            COMMIT: ``then(db, row, key)`` calls elsewhere (a card charge) with ``key`` as
            its idempotency key and writes the result to ``row``; it raises
            :class:`~flask_submit_once.Refused` to refuse (the form again). Interrupted,
            a repeat of the submit or :meth:`resume` resumes it (needs ``model``).
        """
        page = Page(template, fragment, result_fragment, dict(messages or {}), context)

        def decorate(view: View) -> View:
            protected = ProtectedForm(
                view,
                form=form,
                model=model,
                find=find,
                done=done,
                fingerprint=fingerprint,
                page=page,
                on_outcome=on_outcome,
                wait=wait,
                sessions=sessions,
                then=then,
            )

            @functools.wraps(view)
            def submit(**view_args: Any) -> Response:
                return protected.submit(state(), view_args)

            setattr(submit, _FORM, protected)
            if name:
                setattr(submit, NAME_ATTRIBUTE, name)
            return cast(View, submit)

        return decorate

    @renamed_keywords({"answer": "on_outcome"})
    def idempotent(
        self,
        *,
        key: Callable[[], str],
        respond: Callable[[Any], ResponseReturnValue],
        scope: Callable[[], str] | None = None,
        model: type[SubmissionMixin] | None = None,
        find: Callable[[Session, str], Any] | None = None,
        on_outcome: Callable[[Outcome], ResponseReturnValue | None] | None = None,
        fingerprint: Callable[[], str] | None = None,
        ttl: int | None = None,
        wait: float | None = None,
        name: str | None = None,
        sessions: Sessions | None = None,
    ) -> Callable[[View], View]:
        """Make a view take effect once per key its caller chooses (an API's
        ``Idempotency-Key``, a webhook's event id)::

            @app.post("/api/signups")
            @submit_once.idempotent(key=lambda: request.headers["Idempotency-Key"],
                                    model=Signup, respond=lambda s: ({"id": s.id}, 201))
            def create_signup(db):
                return Signup(email=request.json["email"])

        The view runs once per key (with ``db``, and the URL's values), in a transaction
        holding the key's lock and its claim (``SET NX EX``); ``respond(result)`` makes
        its answer. A repeat gets that answer again, made from the row it finds, with
        ``Idempotent-Replayed: true``; a repeat with another request (method, path,
        body) is a 422, one that finds the first still running a 409 (``Retry-After``).
        A view that raises, refuses or fails gives the key back, so the caller can retry
        it; an unconfirmed COMMIT keeps it, so the retry finds the row or makes it.

        :param key: gives the key (raise an HTTP error for a malformed one; a
            ``LookupError``, as of a header not sent, is a 400 problem).
        :param scope: gives whose key it is (an API client): one caller's key means
            nothing to another's.
        :param model: the :class:`~flask_submit_once.SubmissionMixin` model of the rows.
        :param find: instead of ``model``, ``find(db, digest)``.
        :param fingerprint: what the request is (default: method, path and body).
        :param ttl: how long the claim lives (default ``SUBMIT_ONCE_TTL_SECONDS``); the row
            (UNIQUE) keeps the key's effect once for ever.
        :param wait: seconds a repeat waits for the first still running (default None:
            ``SUBMIT_ONCE_WAIT_SECONDS``; 0: a 409 at once).
        :param on_outcome: as for :meth:`form`.
        :param name: what keys are bound to (default: the endpoint and its URL values):
            one name shares keys between views; :meth:`key_digest` takes it.
        :param sessions: this view's sessions (a ``sessionmaker``, a ``scoped_session``
            or Flask-SQLAlchemy's ``db``), instead of the extension's.
        """

        def decorate(view: View) -> View:
            once = IdempotentView(
                view,
                key=key,
                scope=scope,
                model=model,
                find=find,
                respond=respond,
                on_outcome=on_outcome,
                fingerprint=fingerprint,
                ttl=ttl,
                wait=wait,
                name=name,
                sessions=sessions,
            )

            @functools.wraps(view)
            def once_per_key(**view_args: Any) -> Response:
                return once.handle(state(), view_args)

            return cast(View, once_per_key)

        return decorate

    def resume(self, *, wait: float = 0.0) -> dict[str, int]:
        """Do every step left to do (the sweeper: ``flask submit-once resume``, by cron or
        a worker): rows a submit committed whose step was interrupted. A row whose lease a
        request holds (it is doing the step right now) is left to it. Returns how many
        rows ended in each outcome kind."""
        st = state()
        steps = [
            (protected.step, protected.sessions or st.sessions)
            for protected in map(protected_form, current_app.view_functions.values())
            if protected is not None and protected.step is not None
        ]
        return resume_all(steps, wait=wait, lease=float(st.setting("STEP_LEASE_SECONDS")))

    def session_lost(self, error: Exception) -> Response | None:
        """The answer to a failed CSRF check on a protected form's submit, or None when
        this request's endpoint is not one. The extension registers it for Flask-WTF's
        ``CSRFError`` unless the app has a handler of its own, which should call it first:
        another site's post gets a 403 that echoes nothing; the user's own lost session
        gets the form again, input kept, with fresh tokens (400)."""
        protected = protected_form(current_app.view_functions.get(request.endpoint or ""))
        if protected is None:
            return None
        try:
            return protected.session_lost(state())
        except Exception as raised:
            # CrossSiteError, or the form maker's 404, 400 or 503: raised in an error
            # handler it would be a 500, so it is answered as the app answers it in a view.
            return current_app.make_response(current_app.handle_user_exception(raised))
