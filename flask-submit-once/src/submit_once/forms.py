"""OnceForm: one protected form, named once, with an answer for every outcome.

::

    signup = form_tokens.form("signup", template="signup.html", fields=["email"],
                              fingerprint_of=lambda row: row.fingerprint)

    @app.route("/signup", methods=["GET", "POST"])
    def sign_up():
        form = SignUpForm()
        if form.validate_on_submit():
            return signup.submit(create=..., find=..., done=lambda row: url_for("thanks"),
                                 form=form)
        return signup.render(form=form)    # GET: 200; invalid POST: 422, same token

The template gets ``form_token`` (its hidden input is ``{{ form_token_input(form_token)
}}``) and ``once`` (a :class:`Rendering`: ``status``, ``message``, ``existing_url``).
Each outcome answers the way the request asked (:func:`request_kind`): a plain POST,
htmx (``HX-Request``: the ``fragment`` template, ``HX-Redirect`` on success) or JSON
(problem details). To answer one outcome your way, call :meth:`OnceForm.run`, match
what you care about, and hand the rest to :meth:`OnceForm.respond`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from flask import Response, jsonify, render_template, request
from sqlalchemy.orm import Session
from werkzeug.exceptions import BadRequest

from .history import SHOW_AGAIN_ON_BACK
from .runner import (
    Changed,
    Created,
    Duplicate,
    Expired,
    Failed,
    Outcome,
    Refused,
    Sessions,
    StillRunning,
    Unavailable,
    Unconfirmed,
    fingerprint,
)

if TYPE_CHECKING:
    from .extension import FormTokens

__all__ = ["MESSAGES", "OnceForm", "Rendering", "RequestKind", "request_kind"]

T = TypeVar("T")
RequestKind = Literal["html", "htmx", "json"]

#: What the user is told, by outcome; ``messages=`` on a form replaces any of them.
MESSAGES: Mapping[str, str] = {
    "expired": "This form had expired or was already used, so nothing was saved. Your "
               "details are still here: check them and submit again.",
    "changed": "This form was already used, with other details: nothing new was saved. "
               "Check the details below and submit to save them as well.",
    "refused": "This could not be accepted as it is; nothing was saved.",
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
}

#: (status, which token the form gets again) for each outcome that re-renders the form.
#: "same": the submitted one, still good; "fresh": a new one, the old being spent.
_AGAIN: Mapping[str, tuple[int, Literal["same", "fresh"]]] = {
    "invalid": (422, "same"),
    "expired": (409, "fresh"),
    "changed": (409, "fresh"),
    "refused": (422, "fresh"),
    "failed": (503, "fresh"),
    "unconfirmed": (503, "same"),
    "still_running": (503, "same"),
    "unavailable": (503, "same"),
    "session_lost": (400, "fresh"),
}


def request_kind() -> RequestKind:
    """How this request wants its answer: ``"htmx"`` (an ``HX-Request: true``
    header), ``"json"`` (a JSON body, or an ``Accept`` that prefers JSON to HTML),
    else ``"html"``."""
    # Kept in the request's environ: flask.g lives as long as the app context, which a
    # test client's requests inside one ``with app.app_context()`` share.
    kind: RequestKind | None = request.environ.get("submit_once.kind")
    if kind is None:
        if request.headers.get("HX-Request") == "true":
            kind = "htmx"
        elif request.is_json or request.accept_mimetypes.best_match(
                ["text/html", "application/json"]) == "application/json":
            kind = "json"
        else:
            kind = "html"
        request.environ["submit_once.kind"] = kind
    return kind


@dataclass(frozen=True)
class Rendering:
    """What a template learns about this rendering of its form, as ``once``."""
    #: The HTTP status the page is answered with.
    status: int = 200
    #: What to tell the user (None on a plain rendering).
    message: str | None = None
    #: Why the form is shown again: an outcome's name, ``"invalid"``, or None.
    reason: str | None = None
    #: Where the result a changed resubmit collided with lives.
    existing_url: str | None = None
    #: Tokens of the page's other forms (``with_forms``), None where Redis was away.
    tokens: Mapping[str, str | None] = field(default_factory=dict)


class OnceForm(Generic[T]):
    """One protected form; made by :meth:`FormTokens.form <submit_once.FormTokens.form>`.

    :param name: the form's name, written only here (the token is bound to it).
    :param template: the page holding the form; ``fragment``: the part htmx swaps
        (the ``<form>`` alone), rendered with the same context.
    :param fields: the fields that make a submission what it is; their fingerprint
        is stored with the result (``create`` reads :meth:`fingerprint`) and compared
        on every resubmit, which with other values is :class:`~submit_once.Changed`.
    :param fingerprint_of: reads the stored fingerprint back from a result.
    :param sessions: where the transaction runs (see :func:`submit_once.submit_once`);
        may be given to :meth:`run` instead.
    :param with_forms: the names of the page's other protected forms: every
        rendering issues their tokens in the same round trip.
    :param messages: replaces any of :data:`MESSAGES`.
    """

    def __init__(self, tokens: FormTokens, name: str, *, template: str,
                 fragment: str | None = None, fields: Sequence[str] = (),
                 fingerprint_of: Callable[[T], str | None] | None = None,
                 sessions: Sessions | None = None, with_forms: Sequence[str] = (),
                 messages: Mapping[str, str] | None = None) -> None:
        if bool(fields) != (fingerprint_of is not None):
            raise TypeError(f"form {name!r}: give fields and fingerprint_of together (the "
                            "fields to compare, and how to read their stored fingerprint)")
        self.tokens, self.name, self.template, self.fragment = tokens, name, template, fragment
        self.fields, self.fingerprint_of, self.sessions = tuple(fields), fingerprint_of, sessions
        self.with_forms = tuple(with_forms)
        self.messages = {**MESSAGES, **(messages or {})}

    def fingerprint(self) -> str | None:
        """The fingerprint of this request's ``fields`` (form or JSON body), or None
        when the form names none. Store it with the row in ``create``."""
        if not self.fields:
            return None
        # Computed once a request: the fast path, run() and create all ask for it.
        known: dict[str, str] = request.environ.setdefault("submit_once.fingerprints", {})
        if self.name not in known:
            body = request.get_json(silent=True) if request.is_json else None
            if isinstance(body, dict):
                values: dict[str, object] = {name: body.get(name) for name in self.fields}
            else:
                values = {name: request.form.getlist(name) for name in self.fields}
            known[self.name] = fingerprint(values)
        return known[self.name]

    def run(self, *, create: Callable[[Session, str], T],
            find: Callable[[Session, str], T | None],
            sessions: Sessions | None = None) -> Outcome[T]:
        """Spend the submitted token and run ``create`` once (the explicit path).
        Raises :class:`~submit_once.BadFormToken` (400) and
        :class:`~submit_once.Unavailable` as :class:`~submit_once.FormTokens` does."""
        sessions = sessions if sessions is not None else self.sessions
        if sessions is None:
            raise TypeError(f"form {self.name!r}: pass sessions= to form() or to run()")
        token = self.tokens.submitted_token()
        fingerprint = self.fingerprint()
        known = self.tokens.already_submitted(self.name, token, fingerprint=fingerprint)
        if known is not None:
            return known
        return self.tokens.submit_once(self.name, token, sessions=sessions, create=create,
                                       find=find, fingerprint=fingerprint,
                                       fingerprint_of=self.fingerprint_of)

    def submit(self, *, create: Callable[[Session, str], T],
               find: Callable[[Session, str], T | None], done: Callable[[T], str],
               sessions: Sessions | None = None, **context: Any) -> Response:
        """:meth:`run`, then :meth:`respond`; ``context`` is the template's, should the
        form be shown again."""
        try:
            outcome = self.run(create=create, find=find, sessions=sessions)
        except Unavailable:
            return self.again("unavailable", **context)
        return self.respond(outcome, done=done, **context)

    def respond(self, outcome: Outcome[T], *, done: Callable[[T], str],
                **context: Any) -> Response:
        """The default answer to ``outcome``. ``done(result)`` is the URL of the result
        (a plain POST is redirected there with 303; htmx gets ``HX-Redirect``; JSON a
        ``Location``)."""
        match outcome:
            case Created(result) | Duplicate(result):
                return self.landed(done(result), created=isinstance(outcome, Created))
            case Changed(result):
                return self.again("changed", existing_url=done(result), **context)
            case Expired():
                return self.again("expired", **context)
            case Failed(Refused() as refused):
                return self.again("refused", message=str(refused) or None, **context)
            case Failed():
                return self.again("failed", **context)
            case Unconfirmed():
                return self.again("unconfirmed", **context)
            case StillRunning():
                return self.again("still_running", headers={"Retry-After": "2"}, **context)
        raise TypeError(f"not an outcome: {outcome!r}")

    def render(self, *, status: int | None = None, headers: Mapping[str, str] | None = None,
               **context: Any) -> Response:
        """The form for this request: on a GET with fresh tokens (200); on a POST that
        never reached :meth:`submit` (its fields did not validate), 422 with the same
        token. With Redis away a GET raises :class:`~submit_once.Unavailable` once for
        the whole page (all its tokens are one round trip): answer it with a 503 page
        (``@app.errorhandler(Unavailable)``). A form shown again after a submit is never
        lost to Redis being away: it keeps its own token whatever the page's other forms
        can get (``once.tokens`` has None for them), and when it needed a fresh one it
        is a 503 with the token it was sent with."""
        if request.method in ("GET", "HEAD"):
            response = self._page(Rendering(), None, context)
            # Back shows this page again as it was, with its token (see history.py).
            response.headers["Cache-Control"] = SHOW_AGAIN_ON_BACK
        else:
            response = self.again("invalid", **context)
        if status is not None:
            response.status_code = status
        response.headers.update(headers or {})
        return response

    def recover(self, **context: Any) -> Response:
        """The answer to a lost session (Flask-WTF's ``CSRFError``): the form again,
        400, the input kept, fresh tokens. Register it for the form's blueprint::

            @bp.errorhandler(CSRFError)
            def session_lost(error):
                return signup.recover(form=SignUpForm())
        """
        return self.again("session_lost", **context)

    def again(self, reason: str, *, message: str | None = None,
              existing_url: str | None = None, headers: Mapping[str, str] | None = None,
              **context: Any) -> Response:
        """The form shown again with the user's input for ``reason`` (a key of
        :data:`MESSAGES`, or ``"invalid"``), with the status and token that reason
        calls for; ``message`` replaces the reason's, ``headers`` are added."""
        status, which = _AGAIN[reason]
        same = self._submitted_token() if which == "same" else None
        rendering = Rendering(status=status, reason=reason, existing_url=existing_url,
                              message=message or self.messages.get(reason))
        response = self._page(rendering, same, context)
        response.headers.update(headers or {})
        return response

    def _page(self, rendering: Rendering, same: str | None, context: dict[str, Any]) -> Response:
        names = ([] if same else [self.name]) + [n for n in self.with_forms if n != self.name]
        issued: dict[str, str | None] = dict.fromkeys(names)
        try:
            issued.update(self.tokens.issue_many(names) if names else {})
        except Unavailable:
            if request.method in ("GET", "HEAD"):
                raise  # a page with no token to show: the app's 503, once for the page
            # A form shown again keeps its input whatever Redis can give: its own token
            # when that is still good, else the one it was sent with (spent, so the
            # resubmit is told "expired" and gets a fresh one once Redis is back).
            if same is None:
                same = self._submitted_token()
                rendering = Rendering(503, self.messages["unavailable"], "unavailable",
                                      rendering.existing_url)
        token = same or issued.pop(self.name, None)
        rendering = Rendering(rendering.status, rendering.message, rendering.reason,
                              rendering.existing_url, issued)
        kind = request_kind()
        if kind == "json":
            return self._problem(rendering, token, context)
        template = self.fragment if kind == "htmx" and self.fragment else self.template
        html = render_template(template, form_token=token, once=rendering, **context)
        return Response(html, rendering.status)

    def _problem(self, rendering: Rendering, token: str | None,
                 context: dict[str, Any]) -> Response:
        body: dict[str, Any] = {"title": rendering.reason or "form", "status": rendering.status}
        if rendering.status != 200:
            body.update(type="about:blank", detail=rendering.message)
        errors = getattr(context.get("form"), "errors", None)
        if rendering.reason == "invalid" and errors:  # a WTForms form's errors, by field
            body["errors"] = {name: list(messages) for name, messages in errors.items()}
        if token:
            body[self.tokens.state().field] = token
        if rendering.existing_url:
            body["existing"] = rendering.existing_url
        response = jsonify(body)
        response.status_code = rendering.status
        if rendering.status != 200:
            response.mimetype = "application/problem+json"
        return response

    def landed(self, url: str, *, created: bool) -> Response:
        """The answer that takes the user to the result at ``url`` (created now, or by
        an earlier submit): 303 for a plain POST, 200 with ``HX-Redirect`` for htmx,
        201 or 200 JSON with ``Location`` for a script."""
        kind = request_kind()
        if kind == "htmx":  # htmx follows this with a full page load of the result
            return Response("", 200, {"HX-Redirect": url})
        if kind == "json":
            response = jsonify(status="created" if created else "duplicate", location=url)
            response.status_code = 201 if created else 200
            response.headers["Location"] = url
            return response
        return Response("", 303, {"Location": url})

    def _submitted_token(self) -> str | None:
        try:
            return self.tokens.submitted_token()
        except BadRequest:  # missing or malformed: the form gets a fresh one
            return None
