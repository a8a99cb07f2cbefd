"""Every outcome's answer, the way the request asked: a plain POST (and Turbo), htmx, or a
script that wants JSON (``fetch()``, an API client); and ``submit_once`` in templates.

What happened to a submit is one :class:`Outcome`, whose ``kind`` says what the user is
shown: a committed on the result (303, ``HX-Redirect``, the result's fragment in place,
201/200 JSON), or the form again with the status and token its reason calls for
(:data:`AGAIN`), or a problem+json for a script.

In templates, ``submit_once`` draws the hidden input of a form and says what the user is
told::

    <form method="post" action="{{ url_for('sign_up') }}">
      {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
      {{ form.csrf_token }} {{ submit_once.input("sign_up") }}

``input`` names the form the way ``url_for`` names its endpoint (the endpoint the form is
sent to, and the values of its URL), so every form of a page finds its own token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from flask import (
    Flask,
    Response,
    current_app,
    jsonify,
    make_response,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from markupsafe import Markup
from werkzeug.exceptions import HTTPException

from . import signals
from ._errors import TooManyFormsError, UnavailableError, cause_of
from ._issuing import form_name, request_token, reuse_token, tokens_for_page
from ._uploads import kept_inputs, kept_name

if TYPE_CHECKING:
    from ._extension import State

__all__ = [
    "AGAIN",
    "MESSAGES",
    "Answering",
    "Kind",
    "Message",
    "Outcome",
    "Page",
    "TemplateHelper",
    "VERSION_FIELD",
    "form_again",
    "check_done",
    "key_problem",
    "log_503",
    "to_result",
    "refused_request",
    "request_kind",
    "result_url",
]


Kind: TypeAlias = Literal[
    "created",
    "duplicate",
    "changed",
    "invalid",
    "expired",
    "refused",
    "stale",
    "failed",
    "unconfirmed",
    "still_running",
    "unavailable",
]

log = logging.getLogger("flask_submit_once")


@dataclass(frozen=True)
class Outcome:
    """What happened to one submit; a protected view's ``on_outcome`` hook gets it::

        def on_outcome(outcome):
            match outcome:
                case Outcome(kind="created", result=signup):
                    flash(f"Welcome, {signup.email}")
            # The default answer for everything else.
            return None

    ``kind`` is one of:

    ``"created"``
        this request consumed the token and committed ``result`` (what the view returned).
    ``"duplicate"``
        an earlier request with this token committed ``result`` (a double click, a
        reload, Back + submit, a retry); ``waited`` when it was still running.
    ``"changed"``
        an earlier request with this token committed ``result`` from *other* input
        (Back, edit, submit; a duplicated tab): nothing new was done, and what this
        request sent is not in ``result``.
    ``"invalid"``
        the form's fields did not validate; nothing was consumed (the form is shown again
        with the input and the same token, 422).
    ``"expired"``
        nothing exists for this token: it expired, was never issued here, or the request
        that consumed it failed (``waited`` is then usually true).
    ``"refused"``
        the view raised :class:`~flask_submit_once.Refused` (``error``); nothing committed.
    ``"stale"``
        the view changed a :class:`~flask_submit_once.VersionedMixin` row that another
        edit changed since the form's page was drawn (its version is not the one the form
        carries): nothing was written, and ``result`` is the row, read again as it is
        now. The token is good again (a repeat is told the same).
    ``"failed"``
        the transaction failed after the token was consumed (``error``); nothing committed.
    ``"unconfirmed"``
        the database connection died mid-transaction, perhaps during the COMMIT: nobody
        knows whether ``result`` was committed. The token was restored, so resubmitting
        *the same* token tells (it is taken to the row, or makes it once).
    ``"still_running"``
        the request holding the token ran past the wait bound; resubmitting later is safe.
    ``"unavailable"``
        Redis or the database did not answer before the token was consumed (``error``:
        what did not answer): nothing was consumed or written, the token is still good.

    ``url`` is where the result is shown, when the form names one (``done``).
    """

    kind: Kind
    result: Any = None
    waited: bool = False
    error: Exception | None = None
    url: str | None = None
    #: What the answer shows, made in the transaction (an idempotent view's response).
    shown: Any = field(default=None, repr=False, compare=False)

    @property
    def took_effect(self) -> bool:
        """Whether the submit took effect, so the user is taken to the result: created,
        or a repeat of it."""
        return self.kind in ("created", "duplicate")

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == "landed":
                raise AttributeError(
                    "Outcome.landed was renamed took_effect in Flask-Submit-Once 1.0"
                )
            raise AttributeError(f"'Outcome' object has no attribute {name!r}")


#: How a request wants its answer.
RequestKind = Literal["html", "htmx", "json"]


def request_kind() -> RequestKind:
    """``"htmx"`` (``HX-Request: true``), ``"json"`` (a JSON body, or an ``Accept`` that
    prefers JSON to HTML), else ``"html"``. Worked out once a request, from the raw
    headers where they are plain (browsers' own ``Accept`` always names ``text/html``)."""
    environ = request.environ
    kind: RequestKind | None = environ.get("flask_submit_once.kind")
    if kind is None:
        accept = environ.get("HTTP_ACCEPT", "")
        if environ.get("HTTP_HX_REQUEST") == "true":
            kind = "htmx"
        elif "json" in environ.get("CONTENT_TYPE", "").lower() and request.is_json:
            kind = "json"
        elif "json" not in accept:
            kind = "html"
        elif "html" not in accept:
            kind = "json"
        else:
            best = request.accept_mimetypes.best_match(["text/html", "application/json"])
            kind = "json" if best == "application/json" else "html"
        request.environ["flask_submit_once.kind"] = kind
    return kind


#: What the user is told, by reason; a form's ``messages`` replace any of them.
MESSAGES: Mapping[str, str] = {
    "invalid": "Some fields need your attention; nothing was saved yet.",
    "changed": "This form was already used, with other details: nothing new was saved. "
    "Check the details here and submit to save them as well.",
    "expired": "This form had expired or was already used, so nothing was saved. Your "
    "details are still here: check them and submit again.",
    "refused": "This could not be accepted as it is; nothing was saved.",
    "stale": "This was changed since you opened it, so your changes were not saved. It "
    "is shown as it is now; your changes are still in the form: check them and submit "
    "again to save them over it.",
    "failed": "We could not save this just now, so nothing was saved. Your details are "
    "still here: please submit again.",
    "unconfirmed": "We could not confirm whether this was saved. Your details are kept: "
    "submit again in a moment, and it will not be saved twice.",
    "still_running": "Your first submit is still being processed. Submit again in a "
    "moment: it will not be saved twice.",
    "unavailable": "We could not reach our systems just now, so nothing was saved. Your "
    "details are kept: please submit again in a moment.",
    "session_lost": "Your session had expired, so this form could not be accepted yet. "
    "Your details are still here: check them and submit again.",
    "too_many": "Nothing new was saved, and no new form can be opened for you just now: "
    "very many were opened in a short while. Your details are kept here: submit them "
    "again in {wait}.",
}
#: What a script is told (it has no "details below" to look at).
JSON_DETAILS: Mapping[str, str] = {
    "invalid": "Fix the fields listed in errors and submit again with the same token.",
    "changed": "This token was already used with other values; nothing new was saved. "
    "The result it made is at existing; to save these values too, submit them "
    "again with the fresh token.",
    "expired": "The token expired or was already used; nothing was saved. Submit again "
    "with the fresh token.",
    "refused": "Not accepted; nothing was saved. Submit again with the fresh token.",
    "stale": "The record changed since the version this request was made from; nothing "
    "was saved. Read it again, then submit with its version and the same token.",
    "failed": "Nothing was saved. Submit again with the fresh token.",
    "unconfirmed": "Could not confirm whether this was saved. Submit again with the same "
    "token: it is saved once, or its result is returned.",
    "still_running": "The first submit with this token is still running. Submit again with "
    "the same token after Retry-After.",
    "unavailable": "Nothing was saved. Submit again with the same token after Retry-After.",
    "session_lost": "The session expired. Submit again with the fresh tokens.",
    "too_many": "Nothing new was saved, and no fresh token can be issued to this session or "
    "address for now. Submit again with the same token after Retry-After.",
}
#: What a form says where its token would be, on a page that answers a submit and could
#: not be given one for it (the next form of a result shown in place, the other forms of
#: a page drawn again): a submit is never refused for the form after it.
NO_TOKEN: Mapping[str, str] = {
    "too_many": "No new form can be opened for you just now, as very many were opened in "
    "a short while: reload the page in {wait} to send this one.",
    "unavailable": "This form cannot be sent just now, as our systems did not answer: "
    "reload the page in a moment to send it.",
}
#: (status, which token the form gets again): "same", still good, or a "fresh" one.
AGAIN: Mapping[str, tuple[int, Literal["same", "fresh"]]] = {
    "invalid": (422, "same"),
    "changed": (409, "fresh"),
    "expired": (409, "fresh"),
    "refused": (409, "fresh"),
    "stale": (409, "same"),
    "failed": (503, "fresh"),
    "unconfirmed": (503, "same"),
    "still_running": (503, "same"),
    "unavailable": (503, "same"),
    "session_lost": (400, "fresh"),
    # The reason a form needing a fresh token is given back with its own, at the caps.
    "too_many": (429, "same"),
}
_REFUSED = {"FormTokenError": "bad_form_token", "NotUnicodeError": "not_unicode"}
_RETRY = {"still_running": "2", "unconfirmed": "5", "unavailable": "5", "failed": "5"}
#: The field carrying the version of the row a form edits (``submit_once.version_input``).
VERSION_FIELD = "submit_once_version"
#: One URL answers a page, a fragment or JSON by these headers.
VARY = ("HX-Request", "Accept")


#: A form's words for a reason: a text, or made from the outcome (say, naming the order).
Message = str | Callable[[Outcome], str]


@dataclass(frozen=True)
class Page:
    """Where a form is drawn: its page, its htmx fragment, the htmx fragment of its result
    (None: htmx is sent to the result's page), its words, and the rest of its context."""

    template: str | None = None
    fragment: str | None = None
    result_fragment: str | None = None
    messages: Mapping[str, Message] = field(default_factory=dict)
    context: Callable[[], Mapping[str, Any]] | None = None

    def message(self, reason: str, outcome: Outcome | None) -> str | None:
        words = self.messages.get(reason, MESSAGES.get(reason))
        if callable(words):
            return words(outcome or Outcome("expired"))
        return words


def decided(
    app: Flask,
    outcome: Outcome,
    *,
    form: str,
    digest: str,
    started: float,
    on_outcome: Callable[[Outcome], ResponseReturnValue | None] | None,
) -> Response | None:
    """Tell the ``submit_decided`` receivers how a submit ended (``started``: its
    ``time.perf_counter()``), then let the view's ``on_outcome`` answer it: its response,
    or None for the decorator's own answer."""
    if signals.submit_decided.receivers:
        signals.submit_decided.send(
            app, form=form, outcome=outcome, digest=digest, seconds=time.perf_counter() - started
        )
    if on_outcome is not None:
        custom = on_outcome(outcome)
        if custom is not None:
            return make_response(custom)
    return None


def to_result(page: Page, url: str | None, *, created: bool, result: object = None) -> Response:
    """The answer that takes the user to the result at ``url``: 303 for a plain POST (and
    Turbo); for htmx, the result's fragment in place (with ``Content-Location``) or
    ``HX-Redirect``; for a script, 201 or 200 JSON with ``Location``."""
    kind = request_kind()
    if kind == "htmx" and page.result_fragment:
        # The next form it draws may not get a token: the answer is the saved result all the same.
        request.environ[_LANDED] = True
        html = render_template(page.result_fragment, result=result, **_context(page))
        response = Response(html, 201 if created else 200)
        if url:
            response.headers["Content-Location"] = url
    elif kind == "htmx":
        response = Response("", 200, {"HX-Redirect": url or ""})
    elif kind == "json":
        response = jsonify(status="created" if created else "duplicate", location=url)
        response.status_code = 201 if created else 200
    else:
        response = Response("", 303)
    if url and kind != "htmx":
        response.headers["Location"] = url
    _vary(response)
    return response


def form_again(
    state: State,
    page: Page,
    name: str,
    reason: str,
    *,
    sent: str | None,
    form: object = None,
    outcome: Outcome | None = None,
    message: str | None = None,
) -> Response:
    """The form shown again for ``reason``, with the user's input (``form``), the status
    and token that reason calls for (``sent``, the token it came with, or a fresh one),
    and ``message`` or the form's words for the reason (and ``outcome``). A fresh token
    that Redis cannot give makes it the "unavailable" answer with the token it was sent
    with, input kept."""
    existing_url = outcome.url if outcome is not None and reason == "changed" else None
    cause = outcome.error if outcome is not None else None
    status, which = AGAIN[reason]
    retry_after = _RETRY.get(reason)
    if which == "same" and sent:
        reuse_token(name, sent)
    else:
        try:
            tokens_for_page(state, [name])
        except UnavailableError as unavailable:
            if sent:
                # Consumed: its resubmit is told "expired" once Redis is back.
                reuse_token(name, sent)
            reason, message = "unavailable", None
            cause = unavailable.cause
            status, retry_after = AGAIN[reason][0], _RETRY[reason]
        except TooManyFormsError as error:
            # The caps limit the forms opened, never what was typed. Sent again (spent), it
            # is told what it is once a fresh token can be had ("changed", "expired").
            if sent:
                reuse_token(name, sent)
            reason, message = "too_many", None
            status, retry_after = AGAIN[reason][0], str(seconds_to_wait(error))
    words = message or page.message(reason, outcome)
    if words and retry_after is not None:
        words = words.replace("{wait}", wait_words(int(retry_after)))
    answer_with(Answering(name, status, reason, words, existing_url))
    kind = request_kind()
    template = page.fragment if kind == "htmx" and page.fragment else page.template
    if kind == "json" or template is None:
        response = _problem(state, name, reason, status, form, existing_url)
    else:
        # The form as sent, unless the form's context draws another ``form`` on purpose.
        response = Response(render_template(template, **{"form": form, **_context(page)}), status)
    if retry_after is not None:
        response.headers["Retry-After"] = retry_after
    _vary(response)
    if status == 503:
        log_503(name, reason, cause)
    return response


#: Why a submit is answered 503 when no exception says it.
_NO_CAUSE = {"still_running": "the submit holding its token was still running when the wait ended"}


def log_503(form: str, reason: str, cause: BaseException | None) -> None:
    """Say why a submit of ``form`` was answered 503, once, at WARNING: the reason and what
    caused it (:func:`~flask_submit_once._errors.cause_of`: its class and message, never
    a token, a secret or a statement's parameters)."""
    why = cause_of(cause) if cause is not None else _NO_CAUSE.get(reason, "no cause known")
    log.warning("%s answered 503 (%s): %s", form, reason, why)


def seconds_to_wait(error: TooManyFormsError) -> int:
    """The seconds until a cap's window ends (what its ``Retry-After`` says)."""
    return error.retry_after if isinstance(error.retry_after, int) else 60


def wait_words(seconds: int) -> str:
    """How long ``seconds`` is, in words a form shows ("about 40 minutes")."""
    if seconds <= 60:
        return "a minute"
    minutes = -(-seconds // 60)
    if minutes < 120:
        return f"about {minutes} minutes"
    return f"about {-(-minutes // 60)} hours"


def problem_json(
    status: int, reason: str | None, detail: str, *, title: str | None = None, **more: Any
) -> Response:
    """A problem+json answer (RFC 9457) for a script: ``reason`` is the library's word for
    what happened, ``more`` what else the script needs."""
    if title is None:
        title = (reason or "").replace("_", " ")
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    response = jsonify({**body, "reason": reason, **more})
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response


def _problem(
    state: State, name: str, reason: str, status: int, form: object, existing_url: str | None
) -> Response:
    """The form's problem+json, with what a script needs: the reason, the field errors,
    the result a changed resubmit collided with, and the token to send next."""
    more: dict[str, Any] = {}
    errors = getattr(form, "errors", None)
    if reason == "invalid" and errors:
        more["errors"] = {field: list(messages) for field, messages in errors.items()}
    if existing_url:
        more["existing"] = existing_url
    token = request_token(name)
    if token:
        more[state.field] = token
    if reason == "session_lost":
        # A script has no page to read a new CSRF token from.
        more.update(_new_csrf_token())
    return problem_json(status, reason, JSON_DETAILS[reason], **more)


def refused_request(error: HTTPException) -> Response:
    """A request refused before anything was consumed (its token, its text): problem+json for
    a script; raised again otherwise, for the app's own error page."""
    if request_kind() != "json":
        raise error
    return problem_json(
        error.code or 400,
        _REFUSED.get(type(error).__name__),
        error.description or "",
        title=error.name,
    )


#: What a caller of an idempotent view is told, by outcome kind: (status, detail).
KEY_PROBLEMS: Mapping[str, tuple[int, str]] = {
    "changed": (
        422,
        "This key was first used with another request; use a new key for a new request.",
    ),
    "still_running": (409, "A request with this key has not finished yet; retry shortly."),
    "refused": (409, "Not accepted as things stand; nothing was done."),
    "stale": (
        409,
        "The record changed while this request ran; nothing was done. Retry with the "
        "same key: it is applied to the record as it is now.",
    ),
    "failed": (503, "Nothing was done; retry with the same key."),
    "unconfirmed": (
        503,
        "Could not confirm whether this was done; retry with the same key: "
        "it is done once, or its first answer is returned.",
    ),
}


def key_problem(outcome: Outcome, name: str) -> Response:
    """An idempotent view's (``name``) problem+json for an outcome that did not take
    effect."""
    status, detail = KEY_PROBLEMS.get(outcome.kind, KEY_PROBLEMS["failed"])
    if status == 503:
        log_503(name, outcome.kind, outcome.error)
    if outcome.kind == "refused" and str(outcome.error):
        detail = str(outcome.error)
    response = problem_json(status, outcome.kind, detail)
    if status in (409, 503):
        response.headers["Retry-After"] = "1" if status == 409 else "5"
    return response


def _new_csrf_token() -> dict[str, str]:
    try:
        from flask_wtf.csrf import generate_csrf  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return {}
    return {"csrf_token": str(generate_csrf())}


def _vary(response: Response) -> None:
    """Add ``VARY`` (as a plain header when the response has none yet: nothing to parse)."""
    if "Vary" in response.headers:
        response.vary.update(VARY)
    else:
        response.headers["Vary"] = ", ".join(VARY)


def _context(page: Page) -> Mapping[str, Any]:
    return page.context() if page.context else {}


def result_url(done: str | Callable[[Any], str] | None, result: object) -> str | None:
    """Where ``result`` is shown: ``done(result)``, or the URL of the endpoint ``done``
    with its values taken from the result's attributes, else from this request's URL."""
    if done is None:
        return None
    if callable(done):
        return done(result)
    here = request.view_args or {}
    return url_for(
        done,
        **{
            arg: getattr(result, arg) if hasattr(result, arg) else here[arg]
            for arg in _arguments(done)
        },
    )


def check_done(done: str | Callable[[Any], str] | None, model: type | None) -> None:
    """Before any token is consumed: every value of ``done``'s URL must come from the model's
    attributes or this request's URL (else each submit would consumable its token and fail)."""
    if not isinstance(done, str) or model is None:
        return
    missing = [
        arg
        for arg in _arguments(done)
        if not hasattr(model, arg) and arg not in (request.view_args or {})
    ]
    if missing:
        raise RuntimeError(
            f"done={done!r}: its URL needs {', '.join(missing)}, which "
            f"{model.__name__} has no attribute for and the form's URL does "
            "not carry; pass done=lambda row: url_for(...) instead."
        )


def _arguments(endpoint: str) -> set[str]:
    rules = list(current_app.url_map.iter_rules(endpoint))
    if not rules:
        raise RuntimeError(f"done={endpoint!r} is not an endpoint of this app.")
    return set(rules[0].arguments)


# ``submit_once`` in templates

_ANSWERING = "flask_submit_once.answering"
#: Set while a result htmx swaps in place is drawn.
_LANDED = "flask_submit_once.landed"
#: The forms of this page whose token could not be had, and why.
_NO_TOKEN = "flask_submit_once.no_token"


@dataclass(frozen=True)
class Answering:
    """The submit a page answers: which form, and what its user is told."""

    form: str
    status: int
    reason: str
    message: str | None
    existing_url: str | None = None


def answering() -> Answering | None:
    """The submit this request's page answers, if it answers one."""
    found: Answering | None = request.environ.get(_ANSWERING)
    return found


def answer_with(answer: Answering) -> None:
    request.environ[_ANSWERING] = answer


class TemplateHelper:
    """The ``submit_once`` object of every template."""

    def __init__(self, state: State) -> None:
        self._state = state

    def token(self, endpoint: str, **values: object) -> str | None:
        """The token of one rendering of the form sent to ``endpoint`` (issued at the
        first call of the request, the same after). On a page that answers a submit (the
        form drawn again, or a result htmx swaps in place), a form whose token cannot be
        had (Redis away, the session's or the address's cap reached) is drawn without one
        (None) rather than losing the answered form's input or its saved result."""
        name = form_name(endpoint, values)
        token = request_token(name)
        refused: dict[str, HTTPException] = request.environ.setdefault(_NO_TOKEN, {})
        if token is None and name not in refused:
            try:
                token = tokens_for_page(self._state, [name])[name]
            except (UnavailableError, TooManyFormsError) as error:
                if answering() is None and not request.environ.get(_LANDED):
                    # A page of forms with no token to give: the app's 503 or 429.
                    if isinstance(error, UnavailableError):
                        log_503(name, "unavailable", error.cause)
                    raise
                refused[name] = error
        return token

    def input(self, endpoint: str, **values: object) -> Markup:
        """The hidden input carrying :meth:`token`; when a page that answers a submit could
        not be given one, a ``<p role="status">`` that says when the form can be sent."""
        token = self.token(endpoint, **values)
        if token:
            field = self._state.field
            name = form_name(endpoint, values)
            return Markup('<input type="hidden" name="%s" value="%s">') % (
                field,
                token,
            ) + kept_inputs(self._state, name)
        refused = request.environ.get(_NO_TOKEN, {}).get(form_name(endpoint, values))
        if refused is None:
            return Markup("")
        if isinstance(refused, TooManyFormsError):
            words = NO_TOKEN["too_many"].replace("{wait}", wait_words(seconds_to_wait(refused)))
        else:
            words = NO_TOKEN["unavailable"]
        return Markup('<p class="submit-once-no-token" role="status">%s</p>') % words

    def version_input(self, row: Any) -> Markup:
        """The hidden input carrying the version of ``row`` (a
        :class:`~flask_submit_once.VersionedMixin` row) this page shows: the submit's
        edit of it is checked against it. Drawn again for a ``"stale"`` answer, it carries
        the version the row has now, so the next submit saves over what the page shows."""
        return Markup('<input type="hidden" name="%s" value="%s">') % (VERSION_FIELD, row.version)

    def kept_file(self, field: str) -> str | None:
        """The name of the file kept for the file input ``field`` of the form this page
        draws again (its reference rides with :meth:`input`), or None: a template says
        so beside the input, which the browser always shows empty."""
        found = answering()
        return kept_name(found.form, field) if found else None

    @property
    def message(self) -> str | None:
        """What the user is told about the submit this page answers (None on a GET)."""
        found = answering()
        return found.message if found else None

    @property
    def reason(self) -> str | None:
        """Why the form is shown again: ``"invalid"``, ``"changed"``, ``"expired"``,
        ``"refused"``, ``"stale"``, ``"failed"``, ``"unconfirmed"``, ``"still_running"``,
        ``"unavailable"``, ``"session_lost"`` or ``"too_many"`` (a fresh token was
        needed and a cap refused it: the form keeps the token it was sent with); None on
        a GET."""
        found = answering()
        return found.reason if found else None

    @property
    def existing_url(self) -> str | None:
        """Where the result lives that a changed resubmit collided with."""
        found = answering()
        return found.existing_url if found else None

    @property
    def form(self) -> str | None:
        """The name of the form whose submit this page answers."""
        found = answering()
        return found.form if found else None

    def answered(self, endpoint: str, **values: object) -> Answering | None:
        """What this page tells about the submit of the form sent to ``endpoint`` (with
        ``message``, ``reason``, ``existing_url``), or None when the page answers another
        form's submit, or none: for a page with several forms, each asking of its own."""
        found = answering()
        return found if found and found.form == form_name(endpoint, values) else None
