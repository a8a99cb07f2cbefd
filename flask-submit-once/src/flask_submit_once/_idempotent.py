"""A view that takes effect once per key its caller chooses: an API's ``Idempotency-Key``,
a webhook's event id (what :meth:`SubmitOnce.idempotent
<flask_submit_once.SubmitOnce.idempotent>` puts around it)::

    the key and its scope (the view's key= and scope=), bound to the endpoint
    the transaction: lock, SET NX EX of the key's digest, the view's row, COMMIT
    a repeat: the first answer again, with Idempotent-Replayed: true;
        with another body: 422; still running: 409; failed: the key is given back
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, make_response, request
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from ._answers import Outcome, decided, key_problem, log_503, problem_json
from ._errors import UnavailableError
from ._form import fingerprint, json_body, sent_files
from ._issuing import form_name
from ._model import Sessions, SubmissionMixin, add_submission, check_columns
from ._runner import Committed, Consumable, run_once

if TYPE_CHECKING:
    from ._extension import State

__all__ = ["IdempotentView", "request_fingerprint"]


def request_fingerprint() -> str:
    """What a request is, as far as its key is concerned: method, path and body (JSON
    compared as data, so a retry that serialises the same object differently matches)."""
    body = json_body()
    sent: object = body if body is not None else request.form.to_dict(flat=False)
    files = sent_files() if body is None else None
    if files:
        # An upload is its contents: the same key with another file is another request.
        sent = {"form": sent, "files": files}
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
        on_outcome: Callable[[Outcome], ResponseReturnValue | None] | None,
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
        self.respond, self.on_outcome, self.fingerprint = respond, on_outcome, fingerprint
        self.ttl, self.wait, self.name, self.sessions = ttl, wait, name, sessions
        self.columns_checked: weakref.WeakSet[Flask] = weakref.WeakSet()

    def handle(self, st: State, view_args: Mapping[str, Any]) -> Response:
        """The view, once per key: its answer, or its first answer again."""
        try:
            # Who asks, before what they ask.
            scope = self.scope() if self.scope is not None else ""
            key = self.key()
        except LookupError:
            # key=lambda: request.headers["Idempotency-Key"], and no such header sent.
            return problem_json(
                400,
                "missing_key",
                "This request needs its key (an Idempotency-Key, an event id); nothing was done.",
            )
        name = form_name(self.name or request.endpoint or self.view.__name__, view_args)
        consumable = Consumable(
            st.store,
            st.store.digest(key, session_id=scope, form=name),
            "claimed",
            accept_when_redis_away=st.accept_when_redis_away,
            ttl=self.ttl,
        )
        digest = consumable.digest
        if st.app not in self.columns_checked and check_columns(self.session(st), self.model):
            self.columns_checked.add(st.app)
        stored = self.fingerprint() if self.fingerprint is not None else request_fingerprint()
        started = time.perf_counter()
        # Whether the view ran: then the key is this request's to give back.
        ran: list[bool] = []

        def create(db: Session, digest: str) -> Committed:
            ran.append(True)
            return self.create(db, digest, view_args, stored)

        try:
            outcome = run_once(
                self.session(st),
                consumable,
                create=create,
                find=self.find,
                wait=st.wait if self.wait is None else self.wait,
                fingerprint=stored,
                takeover=True,
                sender=st.app,
            )
        except UnavailableError as unavailable:
            # Nothing claimed: told as every outcome is, then the app's 503 (or the hook's).
            outcome = Outcome("unavailable", error=unavailable.cause)
            custom = decided(
                st.app,
                outcome,
                form=name,
                digest=digest,
                started=started,
                on_outcome=self.on_outcome,
            )
            if custom is not None:
                return custom
            log_503(name, outcome.kind, outcome.error)
            raise
        except BaseException:
            if ran:
                # The view refused (an HTTP error) or broke: nothing was done.
                self.release(consumable)
            raise
        if ran and outcome.kind in ("refused", "failed"):
            self.release(consumable)
        custom = decided(
            st.app, outcome, form=name, digest=digest, started=started, on_outcome=self.on_outcome
        )
        if custom is not None:
            return custom
        if outcome.took_effect:
            response: Response = outcome.shown
            if outcome.kind == "duplicate":
                response.headers["Idempotent-Replayed"] = "true"
            return response
        return key_problem(outcome, name)

    def create(
        self, db: Session, digest: str, view_args: Mapping[str, Any], stored: str
    ) -> Committed:
        result = add_submission(db, digest, stored, lambda: self.view(db, **view_args))
        return Committed(result, None, stored, make_response(self.respond(result)))

    def find(self, db: Session, digest: str) -> Committed | None:
        if self.find_result is not None:
            found = self.find_result(db, digest)
        else:
            assert self.model is not None
            found = self.model.find_submission(db, digest)
        if found is None:
            return None
        return Committed(
            found,
            None,
            getattr(found, "submission_fingerprint", None),
            make_response(self.respond(found)),
        )

    @staticmethod
    def release(consumable: Consumable) -> None:
        """Give the key back, so that a request that did not take effect can be retried."""
        with suppress(RedisError):
            consumable.restore()

    def session(self, st: State) -> Session:
        """This request's session: the view's ``sessions``, else the extension's."""
        return st.request_session(
            self.sessions, "SubmitOnce has no sessions: SubmitOnce(app, sessions=...)."
        )
