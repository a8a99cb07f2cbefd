"""The database side: the model mixin (the columns the pattern needs, and the lookup by
digest), the view's rows add_submission with their submission, and the SQLAlchemy session a
submit works in.

**One SQLAlchemy session per request**, whichever way the app holds its database.
``sessions`` is a ``sessionmaker`` (a session is made for the request the first time it
is asked for, and closed when the request ends), a ``scoped_session`` (its current
session, removed when the request ends: left, it would keep the transaction of the
request's last read open, its connection idle in transaction and out of the pool), or a
Flask-SQLAlchemy ``SQLAlchemy`` object (its current session: the app's own, which it
removes itself). A submit works in that one session from the form's reads to the COMMIT,
so it opens no second one, and nothing it hands out belongs to another request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeAlias, TypeVar

from flask import Flask, has_request_context, request
from sqlalchemy import Connection, DateTime, Engine, String, event, inspect, select
from sqlalchemy.exc import SQLAlchemyError, UnboundExecutionError
from sqlalchemy.orm import (
    Mapped,
    Session,
    declared_attr,
    mapped_column,
    scoped_session,
    sessionmaker,
)

from ._errors import UnsupportedDatabaseError

__all__ = [
    "DIGEST_LENGTH",
    "LEASE_OWNER_LENGTH",
    "SUPPORTED_DATABASES",
    "Sessions",
    "SubmissionMixin",
    "new_session",
    "request_session",
    "set_up_sessions",
    "add_submission",
    "bind_of",
    "check_database",
]

T = TypeVar("T")
_SUBMISSION = "flask_submit_once.submission"

#: A token digest: SHA-256, URL-safe base64 without padding.
DIGEST_LENGTH = 43
#: Who holds a step's lease: a random UUID, in hex.
LEASE_OWNER_LENGTH = 32


class SubmissionMixin:
    """Columns for a model whose rows a protected form creates, one per submission::

        # Or (SubmissionMixin, Base) without Flask-SQLAlchemy.
        class Signup(SubmissionMixin, db.Model):
            id: Mapped[int] = mapped_column(primary_key=True)
            email: Mapped[str]

    It adds ``submission_digest``, the digest of the token that created the row, in a
    UNIQUE column (the last line of defence when Redis gives a consumed token back);
    ``submission_fingerprint``, what the submission was (so that a repeat with other
    input is told apart); and ``submission_step``, the step outside the database still
    to do for it, if its form has one (``then=``), else NULL (a view sets it to None
    itself for a row that needs no step); and the lease of whoever does that step now,
    ``submission_step_lease_owner`` until ``submission_step_lease_until`` (UTC), NULL
    when nobody does it. The protected view fills them: it only returns the row. In a
    migration they are ``VARCHAR(43) NOT NULL UNIQUE``, ``VARCHAR(43)``, ``VARCHAR(64)``,
    ``VARCHAR(32)`` and a timestamp (``TIMESTAMP WITH TIME ZONE`` in PostgreSQL), the
    last two NULL.
    """

    @declared_attr
    def submission_digest(cls) -> Mapped[str]:
        return mapped_column(String(DIGEST_LENGTH), unique=True, nullable=False)

    @declared_attr
    def submission_fingerprint(cls) -> Mapped[str | None]:
        return mapped_column(String(DIGEST_LENGTH), nullable=True)

    @declared_attr
    def submission_step(cls) -> Mapped[str | None]:
        return mapped_column(String(64), nullable=True)

    @declared_attr
    def submission_step_lease_owner(cls) -> Mapped[str | None]:
        return mapped_column(String(LEASE_OWNER_LENGTH), nullable=True)

    @declared_attr
    def submission_step_lease_until(cls) -> Mapped[datetime | None]:
        return mapped_column(DateTime(timezone=True), nullable=True)

    @classmethod
    def find_submission(cls, db: Session, digest: str) -> Any:
        """The row the submission with this digest created, or None."""
        return db.scalar(select(cls).where(cls.submission_digest == digest))


def add_submission(
    db: Session,
    digest: str,
    fingerprint: str | None,
    view: Callable[[], T],
    step: str | None = None,
) -> T:
    """Run a protected view in ``db``, its new :class:`SubmissionMixin` rows add_submission with the
    submission's digest and fingerprint when they are flushed (the view may flush), and
    the row it returns added, marked with the ``step`` still to do, and flushed: its
    defaults and keys are there to be read."""
    db.info[_SUBMISSION] = (digest, fingerprint)
    try:
        result = view()
        if isinstance(result, SubmissionMixin):
            # A view that set submission_step itself (None: this row needs no step) is
            # left to it.
            if not inspect(result).attrs.submission_step.history.has_changes():
                result.submission_step = step
            db.add(result)
        db.flush()
    finally:
        db.info.pop(_SUBMISSION, None)
    return result


@event.listens_for(Session, "before_flush")
def _fill_submission_columns(db: Session, *_: Any) -> None:
    submission = db.info.get(_SUBMISSION)
    if submission is None:
        return
    for row in db.new:
        if isinstance(row, SubmissionMixin) and not row.submission_digest:
            row.submission_digest, row.submission_fingerprint = submission


# The session a submit works in

_KEY = "flask_submit_once.session"
#: The app's own scoped_sessions this request used, removed when it ends.
_SCOPED_KEY = "flask_submit_once.scoped"


class HasScopedSession(Protocol):
    """Anything with a ``session`` that is a ``scoped_session``: a Flask-SQLAlchemy ``db``."""

    @property
    def session(self) -> scoped_session[Any]: ...


#: Where a submit gets its session.
Sessions: TypeAlias = sessionmaker[Session] | scoped_session[Any] | HasScopedSession


#: The databases the library keeps its promises on, by SQLAlchemy dialect name: the one
#: place to name another once it is supported.
SUPPORTED_DATABASES: Mapping[str, str] = {"postgresql": "PostgreSQL"}


def check_database(bind: Engine | Connection | None) -> None:
    """Refuse a database the library does not support (None: not known yet), naming the
    ones it does: each would answer every submit with a 503 (a missing lock function reads
    as a database away), with nothing said."""
    if bind is None or bind.dialect.name in SUPPORTED_DATABASES:
        return
    supported = ", ".join(SUPPORTED_DATABASES.values())
    raise UnsupportedDatabaseError(
        f"Flask-Submit-Once does not support the database of its sessions "
        f"({bind.dialect.name}): it supports {supported}. Give SubmitOnce sessions "
        "bound to one of these."
    )


def bind_of(app: Flask, sessions: Sessions | None) -> Engine | Connection | None:
    """The engine ``sessions`` are bound to, if it is known yet: a sessionmaker's or a
    scoped_session's ``bind``, or Flask-SQLAlchemy's default engine once it is set up on
    ``app``."""
    factory = sessions.session_factory if isinstance(sessions, scoped_session) else sessions
    if isinstance(factory, sessionmaker):
        bind = factory.kw.get("bind")
        return bind if isinstance(bind, Engine | Connection) else None
    if sessions is not None and "sqlalchemy" in app.extensions:
        with app.app_context():
            try:
                engine = getattr(sessions, "engine", None)
            except (KeyError, RuntimeError):
                # No default engine (binds by key alone): checked at first use.
                return None
        return engine if isinstance(engine, Engine) else None
    return None


def _checked(db: Session) -> Session:
    """``db``, once its database is known to be supported (a bind given after init_app)."""
    try:
        bind = db.get_bind()
    except UnboundExecutionError:
        # Nothing to check yet: its first statement says what is missing.
        return db
    check_database(bind)
    return db


def check(sessions: object) -> None:
    """Refuse, at start-up, what cannot give a session (``db.session.session_factory``,
    an engine), saying what to pass."""
    if isinstance(sessions, sessionmaker | scoped_session) or isinstance(
        getattr(sessions, "session", None), scoped_session
    ):
        return
    raise TypeError(
        "sessions must be a sessionmaker, a scoped_session or a Flask-SQLAlchemy "
        f"SQLAlchemy object (pass db itself), not {type(sessions).__name__}"
    )


def request_session(sessions: Sessions) -> Session:
    """This request's session."""
    scoped = (
        sessions if isinstance(sessions, scoped_session) else getattr(sessions, "session", None)
    )
    if isinstance(scoped, scoped_session):
        if scoped is sessions and has_request_context():
            used: list[scoped_session[Any]] = request.environ.setdefault(_SCOPED_KEY, [])
            if scoped not in used:
                used.append(scoped)
        return _checked(scoped())
    db: Session | None = request.environ.get(_KEY)
    if db is None:
        assert isinstance(sessions, sessionmaker)
        # What the view returns is read after the COMMIT: it must not expire there.
        db = request.environ[_KEY] = _checked(sessions(expire_on_commit=False))
    return db


def new_session(sessions: Sessions | None) -> Session:
    """A session outside any request (a command, a worker): closed by its caller."""
    if sessions is None:
        raise RuntimeError("SubmitOnce has no sessions: SubmitOnce(app, sessions=...).")
    scoped = (
        sessions if isinstance(sessions, scoped_session) else getattr(sessions, "session", None)
    )
    if isinstance(scoped, scoped_session):
        return _checked(scoped())
    assert isinstance(sessions, sessionmaker)
    return _checked(sessions(expire_on_commit=False))


def set_up_sessions(app: Flask, sessions: Sessions | None) -> None:
    """Check ``sessions`` (:func:`check`) and their database when it is known
    (:func:`check_database`), and end what each request used: the session made for it,
    and the scoped sessions it read through. An app's own ``scoped_session`` ends with each
    app context, as Flask-SQLAlchemy's does, whoever read through it: the library or the
    app's views."""
    if sessions is not None:
        check(sessions)
        check_database(bind_of(app, sessions))
    app.teardown_request(close_request_session)
    if isinstance(sessions, scoped_session):
        scoped = sessions
        app.teardown_appcontext(lambda _: _remove(scoped))


def close_request_session(_: BaseException | None = None) -> None:
    """Close the session :func:`request_session` made for this request, if any, and
    remove the scoped sessions it used."""
    db: Session | None = request.environ.pop(_KEY, None)
    if db is not None:
        _close(db)
    for scoped in request.environ.pop(_SCOPED_KEY, ()):
        _remove(scoped)


def _remove(scoped: scoped_session[Any]) -> None:
    if scoped.registry.has():
        _close(scoped())
        scoped.remove()


def _close(db: Session) -> None:
    try:
        # Closing rolls back what is open.
        db.close()
    except SQLAlchemyError:
        # Its connection died (a failover): answered already, not a 500.
        db.invalidate()
