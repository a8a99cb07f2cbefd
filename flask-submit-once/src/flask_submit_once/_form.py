"""A protected form's submit, top to bottom: what :meth:`SubmitOnce.form
<flask_submit_once.SubmitOnce.form>` puts around a view::

    token: its shape (400), before Redis or the database is touched
    a repeat this process saw land, sent with the same values -> its answer (GETDEL only)
    the form: validate -> invalid: 422, the input and the same token (the database away: 503)
    the transaction: lock, GETDEL, the view's row, its digest and fingerprint, COMMIT
    the answer for the outcome, as the request asked (page, htmx, JSON)
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from flask import Flask, Response, make_response, request
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError
from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from . import signals
from ._answers import Page, again, check_done, landed, refused_request, result_url
from ._errors import BadFormToken, CrossSite, NotUnicode, Unavailable
from ._fingerprint import fingerprint
from ._model import SubmissionMixin, stamped
from ._outcome import Outcome
from ._requests import NAME_ATTRIBUTE, cross_site, form_name, request_kind, submitted_token
from ._runner import UNREACHABLE, Landing, run_once
from ._sent import Fields, csrf_field, sent_fingerprint, submission_values
from ._sessions import Sessions, request_session
from ._signed import SignedExpired
from ._spending import CHECK_HEADER, Spending, status_of
from ._state import Settled, State, state
from ._steps import Step, Then, settled

__all__ = ["CHECK_HEADER", "Fields", "ProtectedForm", "protected_form"]
_FORM = "_submit_once_form"


class ProtectedForm:
    """One protected form: what :meth:`SubmitOnce.form` made of a view."""

    def __init__(
        self,
        view: Callable[..., Any],
        *,
        form: Callable[[], Any] | None,
        model: type[SubmissionMixin] | None,
        find: Callable[[Session, str], Any] | None,
        done: str | Callable[[Any], str] | None,
        fields: Fields | None,
        page: Page,
        answer: Callable[[Outcome], ResponseReturnValue | None] | None,
        sessions: Sessions | None,
        then: Then | None = None,
    ) -> None:
        if model is None and find is None:
            raise TypeError(
                f"{view.__name__}: give model= (a SubmissionMixin model) or "
                "find=, so that a repeat finds what the first submit made"
            )
        if then is not None and model is None:
            raise TypeError(f"{view.__name__}: then= needs model= (rows say the step to do)")
        self.view, self.form, self.model, self.find_result = view, form, model, find
        self.done, self.fields, self.page, self.answer, self.sessions = (
            done,
            fields,
            page,
            answer,
            sessions,
        )
        self.checked: weakref.WeakSet[Flask] = weakref.WeakSet()
        self.step = Step(then.__name__, then, model) if then and model else None

    def view_function(self, name: str | None) -> Any:
        """The Flask view: this form's submit, found again by :func:`protected_form`."""

        @functools.wraps(self.view)
        def submit(**view_args: Any) -> Response:
            try:
                return self.handle(view_args)
            except (BadFormToken, NotUnicode) as error:  # a script is answered in JSON
                return refused_request(error)

        setattr(submit, _FORM, self)
        if name:
            setattr(submit, NAME_ATTRIBUTE, name)
        return submit

    def handle(self, view_args: Mapping[str, Any]) -> Response:
        st = state()
        name = form_name(request.endpoint or self.view.__name__, view_args)
        if request.headers.get(CHECK_HEADER) == "1":
            return self.check(st, name)
        token = submitted_token(st.field)
        if st.app not in self.checked:  # once an app: every value of done's URL is known
            check_done(self.done, self.model)
            self.checked.add(st.app)
        started = time.perf_counter()
        try:
            spend = Spending.of(st, token, name)
        except SignedExpired:
            return self.respond(Outcome("expired"), name, token, self.make_form(), "", started)
        digest = spend.digest
        raw = sent_fingerprint(st.field)
        known = st.settled.get(digest)
        if known is not None and known.raw == raw:
            # Spent, its row committed: the answer is settled (GETDEL: a token a failover revived).
            with suppress(RedisError):
                spend.take()
            outcome, form = Outcome("duplicate", url=known.url), None
            if self.answer is not None or (
                self.page.result_fragment is not None and request_kind() == "htmx"
            ):
                # The hook or htmx's fragment reads the result (no validation) if it can.
                form = self.form() if self.form is not None else None
                try:
                    found = self.find(self.session(st), digest)
                except SQLAlchemyError:  # known.url is answer enough: land there
                    found = None
                outcome = Outcome("duplicate", found.result if found else None, url=known.url)
            return self.respond(outcome, name, token, form, digest, started)
        db = self.session(st)
        form = self.make_form()
        stored = None
        if form is not None:
            try:  # validators may query the database, and so does a repeat's check
                valid = form.validate()
                if not valid and set(form.errors) == {csrf_field(form)}:
                    return self.session_lost()
                stored = fingerprint(self.values(form))
                if not valid:
                    return self.invalid(st, name, token, form, digest, stored, started)
            except UNREACHABLE:  # away before anything was spent: the input, the same token
                with suppress(SQLAlchemyError):
                    db.rollback()
                return again(self.page, name, "unavailable", sent=token, form=form)
        try:
            outcome = run_once(
                db,
                digest=digest,
                take=spend.take,
                create=lambda db, digest: self.create(db, digest, form, view_args, stored),
                find=self.find,
                wait=st.wait,
                fingerprint=stored,
                redis_down_fallback=spend.redis_down_fallback,
                sender=st.app,
            )
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
        """The step, for a row that still has it to do (made now, or found by a repeat,
        which resumes it); a row whose step refused is a refusal again."""
        assert self.step is not None
        row = outcome.result
        pending = self.step.still_to_do(row)  # None: unreadable now; as the transaction read
        if pending:
            identity, digest = inspect(row).identity, row.submission_digest
            db.rollback()  # reading the row began a transaction: none is open during the step
            done = self.step.resume(db.get_bind(), identity, digest, wait=wait, url_of=self.url_of)
            if done.landed:  # whoever did the step: this request made the row, or found it
                return Outcome(
                    outcome.kind,
                    done.result,
                    url=done.url,
                    waited=outcome.kind == "duplicate" or done.waited,
                )
            return done
        if pending is None or outcome.kind != "duplicate":
            return outcome
        return settled(row, self.url_of, outcome.waited)

    def invalid(
        self,
        st: State,
        name: str,
        token: str,
        form: object,
        digest: str,
        stored: str,
        started: float,
    ) -> Response:
        """Fields that do not validate: the form again, input and token kept (422); a repeat
        of this token's landed submit (invalid *now*: off sale, taken) is answered as one."""
        found = self.find(self.session(st), digest)
        if found is None:
            return self.respond(Outcome("invalid"), name, token, form, digest, started)
        with suppress(RedisError):  # a token that came back must not stay live
            Spending.of(st, token, name).take()
        changed = found.fingerprint is not None and found.fingerprint != stored
        outcome = Outcome("changed" if changed else "duplicate", found.result, url=found.url)
        if self.step is not None and not changed:  # a repeat resumes the step, valid or not
            outcome = self.after(self.session(st), outcome, st.wait)
        return self.respond(outcome, name, token, form, digest, started)

    def respond(
        self, outcome: Outcome, name: str, token: str, form: object, digest: str, started: float
    ) -> Response:
        st = state()
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
            return landed(
                self.page, outcome.url, created=outcome.kind == "created", result=outcome.result
            )
        # A refusal's own words, unless the form has its words for refusals.
        message = (
            str(outcome.error) or None
            if outcome.kind == "refused" and "refused" not in self.page.messages
            else None
        )
        return again(
            self.page, name, outcome.kind, sent=token, form=form, outcome=outcome, message=message
        )

    def session_lost(self) -> Response:
        """The answer to a failed session check (Flask-WTF's CSRF): another site's post
        is refused, echoing nothing and setting no cookie; the user's own lost session
        gets the form again, input kept, with fresh tokens for the session it has now
        (when Redis cannot give one, with the token it was sent with: never a form with
        no token, whose submit would be a dead end)."""
        if cross_site():
            raise CrossSite()
        form = self.form() if self.form is not None else None
        try:  # kept on the page only if no fresh token can be had (Redis away)
            sent: str | None = submitted_token(state().field)
        except BadFormToken:
            sent = None
        return again(
            self.page,
            form_name(request.endpoint or "", request.view_args),
            "session_lost",
            sent=sent,
            form=form,
        )

    def check(self, st: State, name: str) -> Response:
        """What became of the submit of this token, spending nothing (``CHECK_HEADER``)."""
        return status_of(st, name, self.session(st), self.find)

    def create(
        self,
        db: Session,
        digest: str,
        form: object,
        view_args: Mapping[str, Any],
        stored: str | None,
    ) -> Landing:
        result = stamped(
            db,
            digest,
            stored,
            lambda: self.view(form, db, **view_args),
            self.step.name if self.step else None,
        )
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
        return result_url(self.done, result)

    def values(self, form: Any) -> Mapping[str, object]:
        return submission_values(form, self.fields)

    def session(self, st: State) -> Session:
        sessions = self.sessions if self.sessions is not None else st.sessions
        if sessions is None:
            raise RuntimeError(
                "SubmitOnce has no sessions: SubmitOnce(app, sessions=...) or "
                "init_app(app, sessions=...), or the form's sessions=."
            )
        return request_session(sessions)


def protected_form(view: object) -> ProtectedForm | None:
    """The protected form a view function is, if it is one."""
    protected = getattr(view, _FORM, None)
    return protected if isinstance(protected, ProtectedForm) else None
