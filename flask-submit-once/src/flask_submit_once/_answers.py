"""How each outcome is answered, the way the request asked: a plain POST (and Turbo), htmx,
or a script that wants JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flask import Response, current_app, jsonify, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from ._errors import Unavailable
from ._issuing import issue, issued, keep
from ._outcome import Outcome
from ._requests import request_kind
from ._state import state
from ._templating import Answering, answer_with

__all__ = ["MESSAGES", "Page", "again", "check_done", "landed", "result_url"]

#: What the user is told, by reason; a form's ``messages`` replace any of them.
MESSAGES: Mapping[str, str] = {
    "invalid": "Some fields need your attention; nothing was saved yet.",
    "changed": "This form was already used, with other details: nothing new was saved. "
    "Check the details here and submit to save them as well.",
    "expired": "This form had expired or was already used, so nothing was saved. Your "
    "details are still here: check them and submit again.",
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
#: What a script is told (it has no "details below" to look at).
JSON_DETAILS: Mapping[str, str] = {
    "invalid": "Fix the fields listed in errors and submit again with the same token.",
    "changed": "This token was already used with other values; nothing new was saved. "
    "The result it made is at existing; to save these values too, submit them "
    "again with the fresh token.",
    "expired": "The token expired or was already used; nothing was saved. Submit again "
    "with the fresh token.",
    "refused": "Not accepted; nothing was saved. Submit again with the fresh token.",
    "failed": "Nothing was saved. Submit again with the fresh token.",
    "unconfirmed": "Could not confirm whether this was saved. Submit again with the same "
    "token: it is saved once, or its result is returned.",
    "still_running": "The first submit with this token is still running. Submit again with "
    "the same token after Retry-After.",
    "unavailable": "Nothing was saved. Submit again with the same token after Retry-After.",
    "session_lost": "The session expired. Submit again with the fresh tokens.",
}
#: (status, which token the form gets again): "same", still good, or a "fresh" one.
AGAIN: Mapping[str, tuple[int, Literal["same", "fresh"]]] = {
    "invalid": (422, "same"),
    "changed": (409, "fresh"),
    "expired": (409, "fresh"),
    "refused": (409, "fresh"),
    "failed": (503, "fresh"),
    "unconfirmed": (503, "same"),
    "still_running": (503, "same"),
    "unavailable": (503, "same"),
    "session_lost": (400, "fresh"),
}
_REFUSED = {"BadFormToken": "bad_form_token", "NotUnicode": "not_unicode"}
_RETRY = {"still_running": "2", "unconfirmed": "5", "unavailable": "5", "failed": "5"}
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


def landed(page: Page, url: str | None, *, created: bool, result: object = None) -> Response:
    """The answer that takes the user to the result at ``url``: 303 for a plain POST (and
    Turbo); for htmx, the result's fragment in place (with ``Content-Location``) or
    ``HX-Redirect``; for a script, 201 or 200 JSON with ``Location``."""
    kind = request_kind()
    if kind == "htmx" and page.result_fragment:
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


def again(
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
    status, which = AGAIN[reason]
    if which == "same" and sent:
        keep(name, sent)
    else:
        try:
            issue(state(), [name])
        except Unavailable:
            if sent:
                keep(name, sent)  # spent: its resubmit is told "expired" once Redis is back
            reason, message = "unavailable", None
            status = AGAIN[reason][0]
    words = message or page.message(reason, outcome)
    answer_with(Answering(name, status, reason, words, existing_url))
    kind = request_kind()
    template = page.fragment if kind == "htmx" and page.fragment else page.template
    if kind == "json" or template is None:
        response = _problem(name, reason, status, form, existing_url)
    else:
        # The form as sent, unless the form's context draws another ``form`` on purpose.
        response = Response(render_template(template, **{"form": form, **_context(page)}), status)
    if reason in _RETRY:
        response.headers["Retry-After"] = _RETRY[reason]
    _vary(response)
    return response


def _problem(
    name: str, reason: str, status: int, form: object, existing_url: str | None
) -> Response:
    """problem+json (RFC 9457) with what a script needs: the reason, the field errors,
    the result a changed resubmit collided with, and the token to send next."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": reason.replace("_", " "),
        "status": status,
        "detail": JSON_DETAILS[reason],
        "reason": reason,
    }
    errors = getattr(form, "errors", None)
    if reason == "invalid" and errors:
        body["errors"] = {field: list(messages) for field, messages in errors.items()}
    if existing_url:
        body["existing"] = existing_url
    token = issued(name)
    if token:
        body[state().field] = token
    if reason == "session_lost":  # a script has no page to read a new CSRF token from
        body.update(_new_csrf_token())
    response = jsonify(body)
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response


def refused_request(error: HTTPException) -> Response:
    """A request refused before anything was spent (its token, its text): problem+json for
    a script; raised again otherwise, for the app's own error page."""
    if request_kind() != "json":
        raise error
    response = jsonify(
        type="about:blank",
        title=error.name,
        status=error.code,
        detail=error.description,
        reason=_REFUSED.get(type(error).__name__),
    )
    response.status_code = error.code or 400
    response.mimetype = "application/problem+json"
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
    if done is None or callable(done):
        return done(result) if done else None
    here = request.view_args or {}
    return url_for(
        done,
        **{
            arg: getattr(result, arg) if hasattr(result, arg) else here[arg]
            for arg in _arguments(done)
        },
    )


def check_done(done: str | Callable[[Any], str] | None, model: type | None) -> None:
    """Before any token is spent: every value of ``done``'s URL must come from the model's
    attributes or this request's URL (else each submit would spend its token and fail)."""
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
