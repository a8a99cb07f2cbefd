"""The database side: the model mixins (the columns the pattern needs, the lookup by
digest, and the version an edit is checked against), the view's rows marked with their
submission, and the SQLAlchemy session a submit works in.

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
from sqlalchemy import Connection, DateTime, Engine, Integer, String, event, inspect, select
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError, UnboundExecutionError
from sqlalchemy.orm import (
    Mapped,
    Session,
    declared_attr,
    mapped_column,
    scoped_session,
    sessionmaker,
)
from sqlalchemy.orm.exc import StaleDataError

from ._errors import SubmitOnceError, UnsupportedDatabaseError

__all__ = [
    "DIGEST_LENGTH",
    "LEASE_OWNER_LENGTH",
    "SUPPORTED_DATABASES",
    "Sessions",
    "Stale",
    "SubmissionMixin",
    "VersionedMixin",
    "new_session",
    "request_session",
    "set_up_sessions",
    "add_submission",
    "bind_of",
    "check_columns",
    "check_database",
]

T = TypeVar("T")
_SUBMISSION = "flask_submit_once.submission"
#: The versioned rows a submit's flushes checked already (the first flush bumps the version).
_CHECKED = "flask_submit_once.checked"
#: The versioned rows a submit's flush is writing: the one a failed UPDATE is about.
_EDITED = "flask_submit_once.edited"

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


class VersionedMixin:
    """A version for a model whose rows a protected form edits (optimistic concurrency)::

        class Patient(VersionedMixin, db.Model):
            id: Mapped[int] = mapped_column(primary_key=True)
            address: Mapped[str]

    It adds ``version``, SQLAlchemy's version counter (``version_id_col``): 1 when the row
    is inserted, one more with every UPDATE the ORM makes of it, and each UPDATE made
    ``WHERE version = <the version read>``, so that two transactions editing the row at
    once cannot both write it. The page that draws the form carries the version it shows
    (``submit_once.version_input(row)``); a submit that UPDATEs the row from another version
    (an edit landed since the page was drawn) is not written: it is the outcome ``"stale"``,
    the form shown again with the input and the row as it is now (409). In a migration the
    column is ``INTEGER NOT NULL DEFAULT 1``. A bulk ``update()`` does not count: SQLAlchemy
    versions the rows the session flushes.
    """

    @declared_attr
    def version(cls) -> Mapped[int]:
        return mapped_column(Integer, nullable=False, server_default="1")

    @declared_attr.directive
    def __mapper_args__(cls) -> dict[str, Any]:
        return {"version_id_col": cls.__table__.c.version}  # type: ignore[attr-defined]


class Stale(SubmitOnceError):
    """A submit's edit of ``row`` made from a page drawn at another version than the row's
    (raised in its flush, before anything is written), or racing another edit of it."""

    def __init__(self, row: VersionedMixin | None) -> None:
        what = type(row).__name__ if row is not None else "The row"
        super().__init__(f"{what} changed since the form was drawn")
        self.row = row


def add_submission(
    db: Session,
    digest: str,
    fingerprint: str | None,
    view: Callable[[], T],
    step: str | None = None,
    version: int | None = None,
) -> T:
    """Run a protected view in ``db``, its new :class:`SubmissionMixin` rows marked with the
    submission's digest and fingerprint when they are flushed (the view may flush), and
    the row it returns added, marked with the ``step`` still to do, and flushed: its
    defaults and keys are there to be read. With ``version`` (the one the form was drawn
    from), a :class:`VersionedMixin` row the view changed at another version raises
    :class:`Stale` at its flush."""
    db.info[_SUBMISSION] = (digest, fingerprint, version)
    # An edit drawn at a version works in a SAVEPOINT: a flush the version counter refuses
    # rolls back to it, not the whole transaction, whose end would let the lock go before
    # the digest is restored (a repeat waiting for the lock would be told "expired", not
    # "stale"). A form that edits no version pays nothing for it.
    savepoint = db.begin_nested() if version is not None else None
    try:
        result = view()
        if isinstance(result, SubmissionMixin):
            # A view that set submission_step itself (None: this row needs no step) is
            # left to it.
            if not inspect(result).attrs.submission_step.history.has_changes():
                result.submission_step = step
            db.add(result)
        db.flush()
        if savepoint is not None:
            savepoint.commit()
    except (Stale, StaleDataError) as error:
        if savepoint is not None and savepoint.is_active:
            savepoint.rollback()
        if isinstance(error, Stale):
            raise
        # The version counter's UPDATE found another version than it read: an edit
        # committed meanwhile (the page's version was the row's when the view read it).
        edited: list[VersionedMixin] = db.info.get(_EDITED, [])
        raise Stale(edited[0] if edited else None) from error
    finally:
        for key in (_SUBMISSION, _CHECKED, _EDITED):
            db.info.pop(key, None)
    return result


@event.listens_for(Session, "before_flush")
def _fill_submission_columns(db: Session, *_: Any) -> None:
    submission = db.info.get(_SUBMISSION)
    if submission is None:
        return
    digest, fingerprint, version = submission
    for row in db.new:
        if isinstance(row, SubmissionMixin) and not row.submission_digest:
            row.submission_digest, row.submission_fingerprint = digest, fingerprint
    edited = [row for row in db.dirty if isinstance(row, VersionedMixin) and db.is_modified(row)]
    db.info[_EDITED] = edited
    if version is None:
        return
    checked: set[Any] = db.info.setdefault(_CHECKED, set())
    for row in edited:
        key = inspect(row).identity_key
        if key in checked:
            continue
        # Before its first flush the row holds the version it was read at; the UPDATE
        # checks that version again, so an edit committed since is caught there too.
        if row.version != version:
            raise Stale(row)
        checked.add(key)


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
SUPPORTED_DATABASES: Mapping[str, str] = {
    "postgresql": "PostgreSQL",
    "sqlite": "SQLite",
    "mariadb": "MariaDB",
}


_SQLITE_IN_MEMORY = (
    "Flask-Submit-Once needs an SQLite database in a file (its writer lock is the file's): "
    "this engine's is in memory, a database of each connection. Use sqlite:///path/to/app.db."
)


def in_memory(engine: Engine) -> bool:
    """Whether an SQLite engine's URL names a database in memory (no file, ``:memory:``, or
    a ``mode=memory`` URI), which each connection has to itself."""
    database = engine.url.database or ""
    return database in ("", ":memory:") or "mode=memory" in database + str(engine.url.query)


def check_database(bind: Engine | Connection | None) -> None:
    """Refuse a database the library does not support (None: not known yet), naming the
    ones it does: each would answer every submit with a 503 (a missing lock function reads
    as a database away), with nothing said."""
    if bind is None:
        return
    if bind.dialect.name == "sqlite" and isinstance(bind, Engine) and in_memory(bind):
        raise UnsupportedDatabaseError(_SQLITE_IN_MEMORY)
    if bind.dialect.name in SUPPORTED_DATABASES:
        return
    supported = ", ".join(SUPPORTED_DATABASES.values())
    raise UnsupportedDatabaseError(
        f"Flask-Submit-Once does not support the database of its sessions "
        f"({bind.dialect.name}): it supports {supported}. Give SubmitOnce sessions "
        "bound to one of these."
    )


def check_columns(db: Session, model: type[Any] | None) -> bool:
    """Refuse a model whose table lacks one of its columns (an app upgraded without its
    migration: 1.0 added the step's lease to :class:`SubmissionMixin`), naming them,
    rather than answer every repeat with the database's error. True once checked (or
    nothing to check: no model, no table yet, whose first INSERT says so); False when the
    database could not be asked, to be checked at a later submit."""
    if model is None:
        return True
    table = model.__table__
    try:
        found = inspect(db.get_bind(model)).get_columns(table.name, schema=table.schema)
    except NoSuchTableError:
        return True
    except SQLAlchemyError:
        return False
    present = {column["name"] for column in found}
    missing = [column.name for column in table.columns if column.name not in present]
    if missing:
        raise RuntimeError(
            f"The table {table.name} has no column {', '.join(missing)}, which {model.__name__} "
            "maps: add them (a migration) before serving. Flask-Submit-Once 1.0 added "
            "submission_step_lease_owner and submission_step_lease_until to SubmissionMixin "
            "(see its CHANGELOG, Upgrading)."
        )
    return True


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
