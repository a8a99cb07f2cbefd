"""One protected form's submit, top to bottom: what :meth:`SubmitOnce.form
<flask_submit_once.SubmitOnce.form>` puts around a view::

    token: its shape (400), before Redis or the database is touched
    token: its MAC (made up, another session's or form's: expired, 409), before validation
    a repeat this process recently saw take effect, sent alike -> its answer (GETDEL only)
    the form: validate -> invalid: 422, the input and the same token (the database away: 503)
      a validator that asked token_is_live() before a costly check and was told spent:
      a repeat, answered by the runner without consuming (no create for an unvalidated form)
    the transaction (_runner): lock, GETDEL, the view's row, its digest and fingerprint, COMMIT
        (an edit of a VersionedMixin row from another version than the page's: 409, input kept)
    the answer for the outcome, as the request asked (_answers: page, htmx, JSON)

Here too is what a submit sent and what it is: the token it carries, its JSON body, and
the fingerprints that tell a repeat of the same submission from one with other input.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
import threading
import time
import unicodedata
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from datetime import date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from flask import Flask, Response, has_request_context, make_response, request
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError
from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from werkzeug.datastructures import FileStorage

from ._answers import (
    VERSION_FIELD,
    Outcome,
    Page,
    check_done,
    decided,
    form_again,
    refused_request,
    request_kind,
    result_url,
    to_result,
)
from ._errors import CrossSiteError, FormTokenError, NotUnicodeError, UnavailableError
from ._issuing import SignedExpired, carry_token, form_name, is_signed
from ._model import Sessions, SubmissionMixin, add_submission, check_columns
from ._runner import (
    UNREACHABLE,
    Committed,
    Consumable,
    NotIssued,
    Step,
    Then,
    refuse_steps_on,
    run_once,
    status,
    step_outcome,
)
from ._tokens import is_well_formed
from ._uploads import GoneUpload, discard_used, gone_fields, input_name, keep_sent, put_back

if TYPE_CHECKING:
    from ._extension import State

__all__ = [
    "CHECK_HEADER",
    "TOKEN_HEADER",
    "Fields",
    "Liveness",
    "ProtectedForm",
    "RecentSubmits",
    "carry",
    "file_digest",
    "fingerprint",
    "json_body",
    "sent_files",
    "token_is_live",
]

#: What makes a submission what it is: some of the form's fields, or a mapping made from it.
Fields: TypeAlias = Sequence[str] | Callable[[Any], Mapping[str, object]]
#: The header a script may send the token in instead of the form field.
TOKEN_HEADER = "X-Submit-Once-Token"
#: A script asking what became of a submit it could not see answered, without consuming
#: anything: the same POST with this header set to 1.
CHECK_HEADER = "X-Submit-Once-Check"
#: A file input's error when the file kept for it is gone and the submit would take effect.
GONE_UPLOAD = "The file you attached is no longer kept here: pick it again."


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
        fingerprint: Fields | None,
        page: Page,
        on_outcome: Callable[[Outcome], ResponseReturnValue | None] | None,
        wait: float | None,
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
        self.done, self.fingerprint, self.page = done, fingerprint, page
        self.on_outcome, self.wait, self.sessions = on_outcome, wait, sessions
        self.checked: weakref.WeakSet[Flask] = weakref.WeakSet()
        self.step = Step(then.__name__, then, model) if then and model else None

    def submit(self, st: State, view_args: Mapping[str, Any]) -> Response:
        """The view's submit, answered; a request refused before anything was consumed (its
        token, its text) is answered in JSON to a script."""
        try:
            return self.handle(st, view_args)
        except (FormTokenError, NotUnicodeError) as error:
            return refused_request(error)

    def handle(self, st: State, view_args: Mapping[str, Any]) -> Response:
        name = form_name(request.endpoint or self.view.__name__, view_args)
        if request.headers.get(CHECK_HEADER) == "1":
            return self.check(st, name)
        token = submitted_token(st.field)
        if st.app not in self.checked:
            # Once an app, before any token is consumed: every value of done's URL is known.
            # And the model's table has its columns (the database away: asked again next time).
            check_done(self.done, self.model)
            if check_columns(self.session(st), self.model):
                self.checked.add(st.app)
        started = time.perf_counter()
        # Files kept when the form was last drawn again, for the inputs left empty.
        put_back(st, name)
        try:
            consumable = Consumable.of(st, token, name)
        except (SignedExpired, NotIssued):
            # Nothing validated: a validator may call elsewhere (a card check).
            return self.respond(st, Outcome("expired"), name, token, self.make_form(), "", started)
        digest = consumable.digest
        liveness = Liveness(consumable)
        request.environ[_LIVENESS] = liveness
        raw = sent_fingerprint(st.field, input_name(st))
        known = st.recent.get(digest)
        if known is not None and known.raw == raw:
            # Consumed, its row committed: the answer is known (GETDEL: a token a failover revived).
            with suppress(RedisError):
                consumable.consume()
            outcome, form = Outcome("duplicate", url=known.url), None
            fragment = self.page.result_fragment is not None and request_kind() == "htmx"
            if self.on_outcome is not None or fragment:
                # The hook or htmx's fragment reads the result (no validation) if it can.
                form = self.make_form()
                try:
                    found = self.find(self.session(st), digest)
                except SQLAlchemyError:
                    # Where the first submit's result is shown is answer enough.
                    found = None
                outcome = Outcome("duplicate", found.result if found else None, url=known.url)
            return self.respond(st, outcome, name, token, form, digest, started)
        db = self.session(st)
        form = self.make_form()
        stored = None
        if form is not None:
            try:
                # Validators may query the database, and so does a repeat's check.
                valid = form.validate()
                if not valid and set(form.errors) == {csrf_field(form)}:
                    return self.session_lost(st)
                stored = fingerprint(self.values(form))
                gone = gone_fields()
                if valid and gone and liveness.ask():
                    # A kept file whose bytes are gone, in a submit that would take effect.
                    for field in gone:
                        if field in form:
                            form[field].errors = [*form[field].errors, GONE_UPLOAD]
                    valid = False
                if not valid:
                    if not liveness.spent:
                        return self.invalid(st, name, token, form, digest, stored, started)
                    # A validator stopped before its costly check, the token spent: a repeat
                    # of the submit that spent it, whatever its fields say now.
                    consumable = consumable.spent()
            except UNREACHABLE as error:
                # Away before anything was consumed: the form again, the input, the same token.
                with suppress(SQLAlchemyError):
                    db.rollback()
                outcome = Outcome("unavailable", error=error)
                return self.respond(st, outcome, name, token, form, digest, started)
        elif gone_fields() and _live_or_unknown(liveness):
            # No form to say it on: the submit is not taken with a file that has no bytes.
            return self.respond(st, Outcome("invalid"), name, token, form, digest, started)
        if self.step is not None:
            refuse_steps_on(db.get_bind(self.step.model))
        try:
            outcome = run_once(
                db,
                consumable,
                create=lambda db, digest: self.create(db, digest, form, view_args, stored),
                find=self.find,
                wait=self.waits(st),
                fingerprint=stored,
                sender=st.app,
            )
        except UnavailableError as error:
            outcome = Outcome("unavailable", error=error.cause)
            return self.respond(st, outcome, name, token, form, digest, started)
        if self.step is not None and outcome.kind in ("created", "duplicate"):
            outcome = self.finish_step(st, db, outcome)
        if outcome.kind == "unconfirmed" and outcome.result is None:
            # Whether the COMMIT took effect is unknown: the same token, good again, tells.
            with suppress(RedisError):
                consumable.restore()
        elif outcome.took_effect:
            st.recent.remember(digest, Recent(outcome.url, raw, stored))
        return self.respond(st, outcome, name, token, form, digest, started)

    def make_form(self) -> Any:
        return self.form() if self.form is not None else None

    def finish_step(self, st: State, db: Session, outcome: Outcome) -> Outcome:
        """The step, for a row that still has it to do (made now, or found by a repeat,
        which resumes it); a row whose step refused is a refusal again."""
        assert self.step is not None
        row = outcome.result
        # None when the row cannot be read again: answered as the transaction found it.
        pending = self.step.still_to_do(row)
        if pending:
            identity, digest = inspect(row).identity, row.submission_digest
            # Reading the row began a transaction: none is open during the step.
            db.rollback()
            done = self.step.resume(
                db.get_bind(),
                identity,
                digest,
                wait=self.waits(st),
                lease=float(st.setting("STEP_LEASE_SECONDS")),
                url_of=self.url_of,
            )
            if done.took_effect:
                # Whoever did the step: this request made the row, or found it.
                return Outcome(
                    outcome.kind,
                    done.result,
                    url=done.url,
                    waited=outcome.kind == "duplicate" or done.waited,
                )
            return done
        if pending is None or outcome.kind != "duplicate":
            return outcome
        return step_outcome(row, self.url_of, outcome.waited)

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
        of this token's submit that took effect (invalid *now*: off sale, taken) is
        answered as one."""
        found = self.find(self.session(st), digest)
        if found is None:
            return self.respond(st, Outcome("invalid"), name, token, form, digest, started)
        with suppress(RedisError):
            # A token that came back must not stay live.
            Consumable.of(st, token, name).consume()
        changed = found.fingerprint is not None and found.fingerprint != stored
        outcome = Outcome("changed" if changed else "duplicate", found.result, url=found.url)
        if self.step is not None and not changed:
            # A repeat resumes the step, valid or not.
            outcome = self.finish_step(st, self.session(st), outcome)
        return self.respond(st, outcome, name, token, form, digest, started)

    def respond(
        self,
        st: State,
        outcome: Outcome,
        name: str,
        token: str,
        form: object,
        digest: str,
        started: float,
    ) -> Response:
        custom = decided(
            st.app, outcome, form=name, digest=digest, started=started, on_outcome=self.on_outcome
        )
        if custom is not None:
            return custom
        if outcome.took_effect:
            discard_used(st)
            return to_result(
                self.page, outcome.url, created=outcome.kind == "created", result=outcome.result
            )
        if request.files:
            keep_sent(st, name)
        message = None
        if outcome.kind == "refused" and "refused" not in self.page.messages:
            # A refusal's own words, unless the form has its words for refusals.
            message = str(outcome.error) or None
        return form_again(
            st,
            self.page,
            name,
            outcome.kind,
            sent=token,
            form=form,
            outcome=outcome,
            message=message,
        )

    def session_lost(self, st: State) -> Response:
        """The answer to a failed session check (Flask-WTF's CSRF): another site's post
        is refused, echoing nothing and setting no cookie; the user's own lost session
        gets the form again, input kept, with fresh tokens for the session it has now
        (when Redis cannot give one, with the token it was sent with: never a form with
        no token, whose submit would be a dead end)."""
        if cross_site():
            raise CrossSiteError()
        form = self.make_form()
        try:
            # Kept on the page only if no fresh token can be had (Redis away).
            sent: str | None = submitted_token(st.field)
        except FormTokenError:
            sent = None
        return form_again(
            st,
            self.page,
            form_name(request.endpoint or "", request.view_args),
            "session_lost",
            sent=sent,
            form=form,
        )

    def check(self, st: State, name: str) -> Response:
        """What became of the submit of this token, consuming nothing (``CHECK_HEADER``):
        ``done`` (and where), ``running``, or ``not_done`` (submitting it is safe)."""
        try:
            digest = Consumable.of(st, submitted_token(st.field), name).digest
        except (SignedExpired, NotIssued):
            return make_response({"status": "not_done", "location": None})
        found, location = status(self.session(st), digest, self.find)
        return make_response({"status": found, "location": location})

    def create(
        self,
        db: Session,
        digest: str,
        form: object,
        view_args: Mapping[str, Any],
        stored: str | None,
    ) -> Committed:
        result = add_submission(
            db,
            digest,
            stored,
            lambda: self.view(form, db, **view_args),
            self.step.name if self.step else None,
            version=sent_version(),
        )
        return Committed(result, self.url_of(result), stored)

    def find(self, db: Session, digest: str) -> Committed | None:
        if self.find_result is not None:
            found = self.find_result(db, digest)
        else:
            assert self.model is not None
            found = self.model.find_submission(db, digest)
        if found is None:
            return None
        return Committed(found, self.url_of(found), getattr(found, "submission_fingerprint", None))

    def url_of(self, result: object) -> str | None:
        return result_url(self.done, result)

    def values(self, form: Any) -> Mapping[str, object]:
        return submission_values(form, self.fingerprint)

    def waits(self, st: State) -> float:
        """Seconds a repeat waits for the first submit: the form's, else the setting."""
        return st.wait if self.wait is None else self.wait

    def session(self, st: State) -> Session:
        """This request's session: the form's ``sessions``, else the extension's."""
        return st.request_session(
            self.sessions,
            "SubmitOnce has no sessions: SubmitOnce(app, sessions=...) or "
            "init_app(app, sessions=...), or the form's sessions=.",
        )


# Whether the token is still live, asked by a validator

_LIVENESS = "flask_submit_once.liveness"


class Liveness:
    """Whether this request's token is still live, asked at most once (one ``EXISTS``);
    ``spent`` once it was asked and found used up."""

    def __init__(self, consumable: Consumable) -> None:
        self.consumable = consumable
        self.spent: bool | None = None

    def ask(self) -> bool:
        if self.spent is None:
            self.spent = self.consumable.is_spent()
        return not self.spent


def _live_or_unknown(liveness: Liveness) -> bool:
    """Whether the token may still be live: Redis away counts as live (the safe side)."""
    try:
        return liveness.ask()
    except UNREACHABLE:
        return True


def token_is_live() -> bool:
    """Whether the token of the protected submit being validated is still live (what
    :meth:`SubmitOnce.token_is_live <flask_submit_once.SubmitOnce.token_is_live>` says)."""
    liveness = request.environ.get(_LIVENESS) if has_request_context() else None
    if not isinstance(liveness, Liveness):
        raise RuntimeError(
            "token_is_live() is asked while a protected form's submit is validated: call "
            "it from the form's validators, not from a view or another request."
        )
    return liveness.ask()


# What a submit sent, and what it is

_CHECKED = "flask_submit_once.json_checked"


def json_body() -> dict[str, Any] | None:
    """The request's JSON object, or None (not JSON, not an object, or unreadable: too
    deep to parse is as unreadable as malformed, never a 500). :class:`NotUnicodeError` (400)
    when it carries a lone surrogate, which no database column or digest can take."""
    if not request.is_json:
        return None
    try:
        body = request.get_json(silent=True)
    except RecursionError:
        return None
    if not isinstance(body, dict):
        return None
    if not request.environ.get(_CHECKED):
        # Read up to three times a submit: checked once.
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise NotUnicodeError() from None
        except (RecursionError, ValueError):
            return None
        request.environ[_CHECKED] = True
    return body


def submitted_token(field: str) -> str:
    """The token this request carries: the form field ``field``, else the
    ``X-Submit-Once-Token`` header, else that member of a JSON object body.
    :class:`FormTokenError` (400) if it is missing, repeated or malformed, before anything
    touches Redis."""
    values: list[Any] = request.form.getlist(field)
    if not values and TOKEN_HEADER in request.headers:
        values = request.headers.getlist(TOKEN_HEADER)
    if not values:
        body = json_body()
        if body is not None and field in body:
            values = [body[field]]
    if len(values) != 1 or not (is_well_formed(values[0]) or is_signed(values[0])):
        raise FormTokenError()
    return str(values[0])


def carry(st: State, name: str) -> str | None:
    """A step of a form in several steps: the token this request carries for the form
    ``name`` (the last step's, which takes effect) is the one this request's page draws
    it with, consuming nothing and sending no command. Missing or malformed it is a
    :class:`FormTokenError` (400), as at the last step: a step that drew a token of its
    own would let Back, Next, Confirm take effect twice. One that is not this session's
    and form's (its MAC; a signed one too old) is not carried, and None: that token can
    never take effect here, so the page draws the form with a fresh one."""
    token = submitted_token(st.field)
    try:
        Consumable.of(st, token, name)
    except (SignedExpired, NotIssued):
        return None
    carry_token(name, token)
    return token


def sent_version() -> int | None:
    """The version of the row this submit edits, as the form's page drew it
    (``submit_once.version_input``): the form field, else that member of a JSON object
    body; None when the form carries none (it edits no versioned row). A value that is not
    a version is 0, which no row has: the edit is told the row changed, never written
    unchecked."""
    value: object = request.form.get(VERSION_FIELD)
    if value is None:
        body = json_body()
        value = body.get(VERSION_FIELD) if body is not None else None
    if value is None:
        return None
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 0


def cross_site() -> bool:
    """Whether the browser says another site's page sent this request:
    ``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not ours (``null`` too)."""
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/") != f"{request.scheme}://{request.host}"


#: WTForms fields that are no part of what was asked for.
_NOT_DATA = ("CSRFTokenField", "SubmitField")


def submission_values(form: Any, fields: Fields | None) -> Mapping[str, object]:
    """What the submission is: the form's data after its filters and coercion (what would
    be stored), of ``fields`` (default: all but CSRF and buttons), or what ``fields(form)``
    says it is."""
    if callable(fields):
        return fields(form)
    try:
        data = {field.name: field.data for field in form if field.type not in _NOT_DATA}
    except TypeError:
        # Not a WTForms form: its data.
        data = dict(form.data)
    return {k: v for k, v in data.items() if fields is None or k in fields}


def sent_fingerprint(*fields_of_ours: str) -> str:
    """A digest of what was sent, as sent: how a repeat of the same bytes (a double click,
    a retry) is known before validation. Only ever compared with another of its own kind
    in this process, so it is taken as sent, without the stored fingerprint's normalising
    (a repeat that differs only in it goes the long way, to the same answer), and without
    ``fields_of_ours`` (the token, the references of kept uploads)."""
    body = json_body()
    sent: Mapping[str, Any] = body if body is not None else request.form.to_dict(flat=False)
    values: dict[str, Any] = {k: v for k, v in sent.items() if k not in fields_of_ours}
    files = sent_files() if body is None else None
    if files:
        # A corrected upload (other bytes, same name) is other input, not a repeat.
        values = {
            "form": values,
            "files": {
                name: [[upload.filename, file_digest(upload)] for upload in uploads]
                for name, uploads in files.items()
            },
        }
    material = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def sent_files() -> dict[str, list[FileStorage]]:
    """The files this request sent, by field name (none unless it is multipart)."""
    return {name: request.files.getlist(name) for name in request.files}


#: Bytes read at a time when a file is hashed; what is kept in memory of a stream that
#: cannot be rewound (Werkzeug's own threshold for spooling an upload to disk).
_CHUNK = 64 * 1024
_SPOOL = 500 * 1024
_DIGESTS = "flask_submit_once.file_digests"


def file_digest(upload: FileStorage) -> str:
    """The SHA-256 of an uploaded file's contents, hex: read once a request (the fast path
    and the stored fingerprint share it), in chunks, and rewound to its start for the view
    to read or save. What there is to read is bounded by ``MAX_CONTENT_LENGTH``, which
    Werkzeug enforces (413) before the token is even read."""
    known: dict[int, tuple[FileStorage, str]] = (
        request.environ.setdefault(_DIGESTS, {}) if has_request_context() else {}
    )
    if id(upload) in known:
        return known[id(upload)][1]
    if isinstance(upload, GoneUpload):
        return upload.digest
    stream = upload.stream
    if not stream.seekable():
        # A stream that cannot be rewound (an app's own stream factory): kept as read.
        kept = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
        shutil.copyfileobj(stream, kept, _CHUNK)
        upload.stream = stream = kept
    stream.seek(0)
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    stream.seek(0)
    # The upload is kept with its digest: its id is not reused while the request lasts.
    known[id(upload)] = (upload, digest.hexdigest())
    return digest.hexdigest()


def csrf_field(form: Any) -> str:
    """The name of a Flask-WTF form's CSRF field."""
    meta = getattr(form, "meta", None)
    return str(getattr(meta, "csrf_field_name", "csrf_token"))


def fingerprint(values: Mapping[str, object]) -> str:
    """A 43-character digest of the values that make a submission what it is.

    Taken over what would be *stored* (a validated form's data, after its filters and
    coercion), not the raw strings, so the same submission sent as ``" José "``, in NFD,
    or with a quantity of ``01`` is the same submission when the form stores it the same.
    Strings are NFC-normalised with line endings as ``\\n`` (browsers send CRLF in a
    textarea); a list of one value is that value (a form field and the same JSON member
    agree); numbers compare by value (``1``, ``1.0`` and ``Decimal("1.00")``); the order
    of the names does not matter; an uploaded file (a ``FileStorage``) is its name and
    the SHA-256 of its contents.
    """
    canonical = json.dumps(
        {name: _canonical(value) for name, value in values.items()},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    # surrogatepass: a JSON body may carry a lone surrogate ("\ud800"), which UTF-8 cannot.
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()
    return base64.urlsafe_b64encode(digest).decode()[:43]


def _canonical(value: object) -> object:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | Decimal):
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        return format(number.normalize(), "f") if number.is_finite() else str(number)
    if isinstance(value, datetime | date | time_of_day):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return _canonical(value[0]) if len(value) == 1 else [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, FileStorage):
        # What the file is: its name and contents (its type is the browser's guess).
        return {"file": value.filename, "sha256": file_digest(value)} if value else None
    return str(value)


#: Recent submits remembered per process (about 200 bytes each).
RECENT_SIZE = 4096


class Recent(NamedTuple):
    """A submit this process saw take effect: where its result is shown, and the fingerprints
    of what it was sent as (the raw values) and what it stored. Plain values only: never
    an ORM object, which belongs to the session of the request that read it."""

    url: str | None
    raw: str | None
    stored: str | None


class RecentSubmits:
    """The last ``size`` submits that took effect, by digest; thread-safe."""

    def __init__(self, size: int = RECENT_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, Recent] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, digest: str, recent: Recent) -> None:
        with self._lock:
            self._items[digest] = recent
            self._items.move_to_end(digest)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def get(self, digest: str) -> Recent | None:
        with self._lock:
            return self._items.get(digest)
