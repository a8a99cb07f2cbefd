"""A view that takes effect once per key its caller chooses: an API's ``Idempotency-Key``,
a webhook's event id (what :meth:`SubmitOnce.idempotent
<flask_submit_once.SubmitOnce.idempotent>` puts around it)::

    the key and its scope (the view's key= and scope=), bound to the endpoint
    the transaction: lock, SET NX EX of the key's digest, the view's row, COMMIT
    a repeat: the first answer again, with Idempotent-Replayed: true;
        with another body: 422; still running: 409; failed: the key is given back
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from flask import Response, jsonify, make_response, request
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from . import signals
from ._fingerprint import fingerprint
from ._model import SubmissionMixin, stamped
from ._outcome import Outcome
from ._requests import form_name, json_body
from ._runner import Landing, run_once
from ._sessions import Sessions, request_session
from ._state import State, state

__all__ = ["IdempotentView", "request_fingerprint"]

_PROBLEMS: Mapping[str, tuple[int, str]] = {
    "changed": (
        422,
        "This key was first used with another request; use a new key for a new request.",
    ),
    "still_running": (409, "A request with this key has not finished yet; retry shortly."),
    "refused": (409, "Not accepted as things stand; nothing was done."),
    "failed": (503, "Nothing was done; retry with the same key."),
    "unconfirmed": (
        503,
        "Could not confirm whether this was done; retry with the same key: "
        "it is done once, or its first answer is returned.",
    ),
}


def request_fingerprint() -> str:
    """What a request is, as far as its key is concerned: method, path and body (JSON
    compared as data, so a retry that serialises the same object differently matches)."""
    body = json_body()
    sent: object = body if body is not None else request.form.to_dict(flat=False)
    return fingerprint({"method": request.method, "path": request.path, "body": sent})


class IdempotentView:
    """One view made idempotent by a caller-chosen key."""

    def __init__(
        self,
        view: Callable[..., Any],
        *,
        key: Callable[[], str],
        scope: Callable[[], str] | None,
        model: type[SubmissionMixin] | None,
        find: Callable[[Session, str], Any] | None,
        respond: Callable[[Any], ResponseReturnValue],
        answer: Callable[[Outcome], ResponseReturnValue | None] | None,
        fingerprint: Callable[[], str] | None,
        ttl: int | None,
        wait: float | None,
        name: str | None,
        sessions: Sessions | None,
    ) -> None:
        if model is None and find is None:
            raise TypeError(f"{view.__name__}: give model= (a SubmissionMixin model) or find=")
        self.view, self.key, self.scope, self.model, self.find_result = (
            view,
            key,
            scope,
            model,
            find,
        )
        self.respond, self.answer, self.fingerprint = respond, answer, fingerprint
        self.ttl, self.wait, self.name, self.sessions = ttl, wait, name, sessions

    def view_function(self) -> Any:
        """The Flask view: this view, once per key."""

        @functools.wraps(self.view)
        def once(**view_args: Any) -> Response:
            return self.handle(view_args)

        return once

    def handle(self, view_args: Mapping[str, Any]) -> Response:
        st = state()
        try:
            scope = self.scope() if self.scope is not None else ""  # who asks, before what
            key = self.key()
        except LookupError:  # key=lambda: request.headers["Idempotency-Key"], none sent
            return _problem(
                400,
                "missing_key",
                "This request needs its key (an Idempotency-Key, an event id); nothing was done.",
            )
        name = form_name(self.name or request.endpoint or self.view.__name__, view_args)
        digest = st.store.digest(key, session_id=scope, form=name)
        stored = self.fingerprint() if self.fingerprint is not None else request_fingerprint()
        started = time.perf_counter()
        ran: list[bool] = []  # the view ran: the key is this request's to give back

        def create(db: Session, digest: str) -> Landing:
            ran.append(True)
            return self.create(db, digest, view_args, stored)

        try:
            outcome = run_once(
                self.session(st),
                digest=digest,
                take=lambda: st.store.claim(digest, ttl=self.ttl),
                create=create,
                find=self.find,
                wait=st.wait if self.wait is None else self.wait,
                fingerprint=stored,
                redis_down_fallback=st.redis_down_fallback,
                takeover=True,
                sender=st.app,
            )
        except BaseException:
            if ran:  # the view refused (an HTTP error) or broke: nothing was done
                self.release(st, digest)
            raise
        if ran and outcome.kind in ("refused", "failed"):
            self.release(st, digest)
        if signals.submit_decided.receivers:
            signals.submit_decided.send(
                st.app,
                form=name,
                outcome=outcome,
                digest=digest,
                seconds=time.perf_counter() - started,
            )
        if self.answer is not None:
            custom = self.answer(outcome)
            if custom is not None:
                return make_response(custom)
        if outcome.landed:
            response: Response = outcome.shown
            if outcome.kind == "duplicate":
                response.headers["Idempotent-Replayed"] = "true"
            return response
        return problem(outcome)

    def create(
        self, db: Session, digest: str, view_args: Mapping[str, Any], stored: str
    ) -> Landing:
        result = stamped(db, digest, stored, lambda: self.view(db, **view_args))
        return Landing(result, None, stored, make_response(self.respond(result)))

    def find(self, db: Session, digest: str) -> Landing | None:
        if self.find_result is not None:
            found = self.find_result(db, digest)
        else:
            assert self.model is not None
            found = self.model.find_submission(db, digest)
        if found is None:
            return None
        return Landing(
            found,
            None,
            getattr(found, "submission_fingerprint", None),
            make_response(self.respond(found)),
        )

    @staticmethod
    def release(st: State, digest: str) -> None:
        """Give the key back, so that a request that did not take effect can be retried."""
        with suppress(RedisError):
            st.store.release(digest)

    def session(self, st: State) -> Session:
        sessions = self.sessions if self.sessions is not None else st.sessions
        if sessions is None:
            raise RuntimeError("SubmitOnce has no sessions: SubmitOnce(app, sessions=...).")
        return request_session(sessions)


def problem(outcome: Outcome) -> Response:
    """The problem+json answer (RFC 9457) of an outcome that did not land."""
    status, detail = _PROBLEMS.get(outcome.kind, _PROBLEMS["failed"])
    if outcome.kind == "refused" and str(outcome.error):
        detail = str(outcome.error)
    response = _problem(status, outcome.kind, detail)
    if status in (409, 503):
        response.headers["Retry-After"] = "1" if status == 409 else "5"
    return response


def _problem(status: int, reason: str, detail: str) -> Response:
    response = jsonify(
        type="about:blank",
        title=reason.replace("_", " "),
        status=status,
        detail=detail,
        reason=reason,
    )
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response
