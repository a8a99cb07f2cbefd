"""A protected form's submit, top to bottom: the token, validation, the once-only
transaction, and the answer every outcome gets.

What :meth:`SubmitOnce.form <flask_submit_once.SubmitOnce.form>` puts around a view::

    token: its shape (400), before Redis or the database is touched
    a repeat this process saw land, sent with the same values -> its answer (GETDEL only)
    the form: validate -> invalid: 422, the input and the same token
    the transaction: lock, GETDEL, the view's row, its digest and fingerprint, COMMIT
    the answer for the outcome, as the request asked (page, htmx, JSON)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, NamedTuple

from flask import Response, current_app, make_response, request, url_for
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from . import signals
from ._answers import Page, again, landed
from ._errors import BadFormToken, CrossSite, Unavailable
from ._fingerprint import fingerprint
from ._issuing import session_id
from ._model import SubmissionMixin, stamped
from ._outcome import Outcome
from ._requests import cross_site, form_name, json_body, submitted_token
from ._runner import Landing, lock_key, run_once
from ._sessions import Sessions, request_session
from ._signed import SignedExpired, is_signed
from ._state import Settled, State, state
from ._steps import Step, Then, settled

__all__ = ["CHECK_HEADER", "Fields", "ProtectedForm"]

#: A script asking what became of a submit it could not see answered, without spending
#: anything: the same POST with this header set to 1.
CHECK_HEADER = "X-Submit-Once-Check"
_NOT_DATA = ("CSRFTokenField", "SubmitField")
#: What makes a submission what it is: some of the form's fields, or a mapping made from it.
Fields = Sequence[str] | Callable[[Any], Mapping[str, object]]


class Spending(NamedTuple):
    """How this request's token is spent: an issued token by its GETDEL; a signed one
    (drawn while Redis was away) by claiming its digest, or, with Redis still away, by
    the lock and the UNIQUE column alone."""
    digest: str
    take: Callable[[], bool]
    put_back: Callable[[], object]
    redis_down_fallback: bool

    @staticmethod
    def of(st: State, token: str, name: str) -> Spending:
        sid = session_id()
        store = st.store
        if not is_signed(token):
            digest = store.digest(token, session_id=sid, form=name)
            return Spending(digest, lambda: store.consume_digest(digest),
                            lambda: store.claim(digest), st.redis_down_fallback)
        if st.signed is None:
            raise BadFormToken()
        digest = store.digest(st.signed.nonce(token, session_id=sid, form=name),
                              session_id=sid, form=name)
        return Spending(digest, lambda: store.claim(digest), lambda: store.release(digest),
                        True)


class ProtectedForm:
    """One protected form: what :meth:`SubmitOnce.form` made of a view."""

    def __init__(self, view: Callable[..., Any], *, form: Callable[[], Any] | None,
                 model: type[SubmissionMixin] | None,
                 find: Callable[[Session, str], Any] | None,
                 done: str | Callable[[Any], str] | None, fields: Fields | None,
                 page: Page, answer: Callable[[Outcome], ResponseReturnValue | None] | None,
                 sessions: Sessions | None, then: Then | None = None) -> None:
        if model is None and find is None:
            raise TypeError(f"{view.__name__}: give model= (a SubmissionMixin model) or "
                            "find=, so that a repeat finds what the first submit made")
        if then is not None and model is None:
            raise TypeError(f"{view.__name__}: a form with then= needs model= (its rows say "
                            "the step still to do)")
        self.view, self.form, self.model, self.find_result = view, form, model, find
        self.done, self.fields, self.page, self.answer = done, fields, page, answer
        self.sessions = sessions
        self.step = Step(then.__name__, then, model) if then and model else None

    def handle(self, view_args: Mapping[str, Any]) -> Response:
        st = state()
        name = form_name(request.endpoint or self.view.__name__, view_args)
        if request.headers.get(CHECK_HEADER) == "1":
            return self.check(st, name)
        token = submitted_token(st.field)
        started = time.perf_counter()
        try:
            spend = Spending.of(st, token, name)
        except SignedExpired:
            return self.respond(Outcome("expired"), name, token, self.make_form(), "",
                                started)
        digest = spend.digest
        raw = self.raw_fingerprint(st.field)
        known = st.settled.get(digest)
        if known is not None and known.raw == raw:
            # The token is spent and its row committed: no validation or SQL can change
            # what this repeat is told. The GETDEL uses up a token a failover brought back.
            with suppress(RedisError):
                spend.take()
            outcome, form = Outcome("duplicate", url=known.url), None
            if self.answer is not None:
                # The hook may read the result (from this request's session) and whatever
                # the form's maker prepared for it; no validation.
                form = self.form() if self.form is not None else None
                found = self.find(self.session(st), digest)
                outcome = Outcome("duplicate", found.result if found else None, url=known.url)
            return self.respond(outcome, name, token, form, digest, started)
        db = self.session(st)
        form = self.make_form()
        stored = None
        if form is not None:
            valid = form.validate()
            if not valid and set(form.errors) == {_csrf_field(form)}:
                return self.session_lost()
            stored = fingerprint(self.values(form))
            if not valid:
                return self.invalid(st, name, token, form, digest, stored, started)
        try:
            outcome = run_once(
                db, digest=digest, take=spend.take,
                create=lambda db, digest: self.create(db, digest, form, view_args, stored),
                find=self.find, wait=st.wait, fingerprint=stored,
                redis_down_fallback=spend.redis_down_fallback, sender=st.app)
        except Unavailable:
            return again(self.page, name, "unavailable", sent=token, form=form)
        if self.step is not None and outcome.kind in ("created", "duplicate"):
            outcome = self.after(db, outcome, st.wait)
        if outcome.kind == "unconfirmed" and outcome.result is None:
            # Whether the COMMIT landed is unknown: the same token, good again, settles it.
            with suppress(RedisError):
                spend.put_back()
        elif outcome.landed:
            st.settled.remember(digest, Settled(outcome.url, raw, stored))
        return self.respond(outcome, name, token, form, digest, started)

    def make_form(self) -> Any:
        return self.form() if self.form is not None else None

    def after(self, db: Session, outcome: Outcome, wait: float) -> Outcome:
        """The step outside the database, for a row that still has it to do (made now, or
        found by a repeat: it resumes it); a row whose step refused is a refusal again."""
        assert self.step is not None
        row = outcome.result
        if self.step.pending(row):
            done = self.step.resume(db.get_bind(), row, wait=wait, url_of=self.url_of)
            if done.kind == "created" and outcome.kind == "duplicate":
                return Outcome("duplicate", done.result, waited=True, url=done.url)
            return done
        return settled(row, self.url_of) if outcome.kind == "duplicate" else outcome

    def invalid(self, st: State, name: str, token: str, form: object, digest: str,
                stored: str, started: float) -> Response:
        """Fields that do not validate: the form again, input and token kept (422); unless
        this token's submit already landed (the form may be invalid *now*: the product
        went off sale, what it asked for is taken), when it is a repeat of that."""
        found = self.find(self.session(st), digest)
        if found is None:
            return self.respond(Outcome("invalid"), name, token, form, digest, started)
        with suppress(RedisError):  # a token that came back must not stay live
            Spending.of(st, token, name).take()
        changed = found.fingerprint is not None and found.fingerprint != stored
        outcome = Outcome("changed" if changed else "duplicate", found.result, url=found.url)
        return self.respond(outcome, name, token, form, digest, started)

    def respond(self, outcome: Outcome, name: str, token: str, form: object, digest: str,
                started: float) -> Response:
        st = state()
        if signals.submit_decided.receivers:
            signals.submit_decided.send(st.app, form=name, outcome=outcome, digest=digest,
                                        seconds=time.perf_counter() - started)
        if self.answer is not None:
            custom = self.answer(outcome)
            if custom is not None:
                return make_response(custom)
        if outcome.landed:
            return landed(self.page, outcome.url, created=outcome.kind == "created",
                          result=outcome.result)
        # A refusal's own words, unless the form has its words for refusals.
        message = str(outcome.error) or None \
            if outcome.kind == "refused" and "refused" not in self.page.messages else None
        return again(self.page, name, outcome.kind, sent=token, form=form, outcome=outcome,
                     message=message)

    def session_lost(self) -> Response:
        """The answer to a failed session check (Flask-WTF's CSRF): another site's post
        is refused, echoing nothing and setting no cookie; the user's own lost session
        gets the form again, input kept, with fresh tokens for the session it has now."""
        if cross_site():
            raise CrossSite()
        form = self.form() if self.form is not None else None
        try:  # kept on the page only if no fresh token can be had (Redis away)
            sent: str | None = submitted_token(state().field)
        except BadFormToken:
            sent = None
        return again(self.page, form_name(request.endpoint or "", request.view_args),
                     "session_lost", sent=sent, form=form)

    def check(self, st: State, name: str) -> Response:
        """What became of the submit of this token, spending nothing: ``done`` (and where),
        ``running``, or ``not_done`` (nothing was made: submitting it is safe)."""
        try:
            digest = Spending.of(st, submitted_token(st.field), name).digest
        except SignedExpired:
            return make_response({"status": "not_done", "location": None})
        db = self.session(st)
        try:
            free = db.connection().exec_driver_sql(
                "SELECT pg_try_advisory_xact_lock(%(key)s)", {"key": lock_key(digest)}).scalar()
            found = self.find(db, digest) if free else None
        finally:
            db.rollback()
        status = "done" if found else "not_done" if free else "running"
        return make_response({"status": status, "location": found.url if found else None})

    def create(self, db: Session, digest: str, form: object, view_args: Mapping[str, Any],
               stored: str | None) -> Landing:
        result = stamped(db, digest, stored, lambda: self.view(form, db, **view_args),
                         self.step.name if self.step else None)
        return Landing(result, self.url_of(result), stored)

    def find(self, db: Session, digest: str) -> Landing | None:
        if self.find_result is not None:
            found = self.find_result(db, digest)
        else:
            assert self.model is not None
            found = self.model.find_submission(db, digest)
        if found is None:
            return None
        return Landing(found, self.url_of(found), getattr(found, "submission_fingerprint", None))

    def url_of(self, result: object) -> str | None:
        """Where ``result`` is shown: ``done(result)``, or the URL of the endpoint ``done``
        with its values taken from the result's attributes, else from this request's URL."""
        if self.done is None or callable(self.done):
            return self.done(result) if self.done else None
        rule = next(current_app.url_map.iter_rules(self.done))
        here = request.view_args or {}
        return url_for(self.done, **{arg: getattr(result, arg) if hasattr(result, arg)
                                     else here[arg] for arg in rule.arguments})

    def values(self, form: Any) -> Mapping[str, object]:
        """What the submission is: the form's data after its filters and coercion (what
        would be stored), or what ``fields(form)`` says it is."""
        if callable(self.fields):
            return self.fields(form)
        try:
            fields = {field.name: field.data for field in form if field.type not in _NOT_DATA}
        except TypeError:  # not a WTForms form: its data
            fields = dict(form.data)
        return {k: v for k, v in fields.items() if self.fields is None or k in self.fields}

    def raw_fingerprint(self, token_field: str) -> str:
        """A digest of what was sent, as sent: how a repeat of the same bytes (a double
        click, a retry) is known before validation."""
        body = json_body()
        sent: Mapping[str, Any] = body if body is not None else request.form.to_dict(flat=False)
        return fingerprint({k: v for k, v in sent.items() if k != token_field})

    def session(self, st: State) -> Session:
        sessions = self.sessions if self.sessions is not None else st.sessions
        if sessions is None:
            raise RuntimeError("SubmitOnce has no sessions: SubmitOnce(app, sessions=...) or "
                               "init_app(app, sessions=...), or the form's sessions=.")
        return request_session(sessions)


def _csrf_field(form: Any) -> str:
    meta = getattr(form, "meta", None)
    return str(getattr(meta, "csrf_field_name", "csrf_token"))
