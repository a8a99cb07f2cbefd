"""Run a submit's transaction once per token, and tell every duplicate what happened.

This is the one place that decides what happened to a submit, its outcome (what
the user is shown for each is ``OnceForm``'s, in forms.py). It is framework-free: it
takes a :class:`~submit_once.tokens.TokenStore`, SQLAlchemy sessions bound to
PostgreSQL (a ``sessionmaker``, a ``scoped_session``, or a Flask-SQLAlchemy
``SQLAlchemy`` object), and two callables of yours::

    create(db, digest) -> result   # add the row (with digest in a UNIQUE column)
    find(db, digest) -> result     # the row an earlier submit created, or None

Every submit runs::

    BEGIN
    SELECT pg_try_advisory_xact_lock(k)   k derived from the token digest
      false: another request holds this token right now -> ROLLBACK, wait, retry
    GETDEL token                           exactly one request ever gets it
      got it:  create(db, digest); COMMIT  -> Created
      missed:  find(db, digest)            -> Duplicate, or Expired
    (COMMIT or ROLLBACK releases the lock)

Why the lock comes before GETDEL, why a waiting duplicate holds no connection and
why the UNIQUE column is still needed: :doc:`/pattern` ("Why each step is where
it is").

With ``redis_down_fallback`` and Redis unreachable at GETDEL, the lock and the
UNIQUE column carry the submit alone (``find``, then ``create``): nothing is
doubled, but an expired token is no longer told from a live one.

Which session each attempt runs in. With a ``sessionmaker``, every attempt
(each poll of the lock, and the transaction) is a new session, closed after
it, made with ``expire_on_commit=False`` so that an ORM object ``create`` or
``find`` returns can still be read after the COMMIT. With a ``scoped_session``
or a Flask-SQLAlchemy ``db``, it is the request's own session: its transaction
is ended first (it must hold no unsaved changes: :class:`RuntimeError`
otherwise), so a waiting duplicate holds no connection, and every attempt ends
its transaction without closing the session, so objects the view loaded stay
usable (they reload when touched).

Redis or PostgreSQL unreachable before this request spent the token is
:class:`Unavailable` (the token is as good as it was); any failure after it
is the outcome :class:`Failed`, or :class:`Unconfirmed` when the connection
died mid-transaction and nobody knows whether the COMMIT landed.

Nothing here cleans up in a ``finally``: an interrupted request (killed worker,
timeout) never restores or deletes a token; the next submit reads what happened.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from .signals import submit_committed, token_consumed
from .tokens import TokenStore

__all__ = [
    "Changed", "Created", "Duplicate", "Expired", "Failed", "Outcome", "Refused", "StillRunning",
    "Unavailable", "Unconfirmed", "fingerprint", "lock_key", "restore", "run_once", "submit_once",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Unavailable(Exception):
    """Redis or PostgreSQL did not answer before this request spent the token.

    Nothing was consumed or written by this request, so the token is as good
    as it was: show the form again with the user's input and *the same token*
    (a 503), and resubmitting it later lands where it should (the order, a
    duplicate of it, or "expired"). The cause (a ``redis.RedisError``, a
    SQLAlchemy ``OperationalError`` or pool ``TimeoutError``) is chained as
    ``__cause__``.

    One case is murkier: a ``GETDEL`` that timed out after it was sent (Redis
    froze rather than went away) may still run when Redis wakes. The token is
    then spent with nothing placed, and the resubmit lands on "expired": the form
    again with the input and a fresh token, whose submit places the order once
    (tests/faults/test_redis_faults.py).
    """


class Refused(Exception):
    """Raise from ``create`` when the submission cannot be accepted as it is
    (e.g. the product went off sale). Nothing is committed; the user may retry."""


@dataclass(frozen=True)
class Created(Generic[T]):
    """This request consumed the token and committed ``result``."""
    result: T


@dataclass(frozen=True)
class Duplicate(Generic[T]):
    """An earlier request with the same token committed ``result``; ``waited``
    when this request found it still running and waited for it."""
    result: T
    waited: bool = False


@dataclass(frozen=True)
class Changed(Generic[T]):
    """An earlier request with the same token committed ``result`` from *other*
    input (a Back + edit + resubmit, a duplicated tab, two versions of one rendering):
    nothing new was done, and this request's input is not in ``result``. Tell the
    user, with their new input and a fresh token; never land them on ``result`` as if
    it were what they just sent. Only given when the caller passes a ``fingerprint``."""
    result: T
    waited: bool = False


@dataclass(frozen=True)
class Expired:
    """Nothing exists for this token: it expired, was never issued here, or the
    request that consumed it failed (``waited`` is then usually True)."""
    waited: bool


@dataclass(frozen=True)
class Failed:
    """This request consumed the token, then the transaction failed; nothing was
    committed. ``error`` is a :class:`Refused` or a database error."""
    error: Exception


@dataclass(frozen=True)
class Unconfirmed:
    """This request consumed the token, then the database connection died
    mid-transaction (a failover during COMMIT): the row may or may not be committed.

    Not a kind of :class:`Failed`: nobody can say "nothing was placed". The token is
    put back (:func:`submit_once` and
    :meth:`FormTokens.submit_once <submit_once.FormTokens.submit_once>` both do it), so
    the same token, resubmitted, settles it: ``create`` either commits or meets the
    UNIQUE column and lands on the row. Answer with the input and *the same* token,
    never a fresh one. ``error`` is the database error."""
    error: Exception


@dataclass(frozen=True)
class StillRunning:
    """The request holding the token ran past the wait bound. Resubmitting the
    same token later is safe: it lands on the result or on Expired."""


Outcome: TypeAlias = (Created[T] | Duplicate[T] | Changed[T] | Expired | Failed | Unconfirmed
                      | StillRunning)


class HasScopedSession(Protocol):
    """Anything with a ``session`` that is a ``scoped_session``: a Flask-SQLAlchemy ``db``."""

    @property
    def session(self) -> scoped_session[Any]: ...


#: Where the runner gets its sessions (see the module docstring).
Sessions: TypeAlias = sessionmaker[Session] | scoped_session[Any] | HasScopedSession

# What "unreachable" means: a Redis error, a lost or refused PostgreSQL
# connection (or a lock or statement timeout), or an empty pool.
_UNREACHABLE = (RedisError, OperationalError, PoolTimeout)

_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%(key)s)"
_WROTE = "SELECT pg_current_xact_id_if_assigned() IS NOT NULL"


def lock_key(digest: str) -> int:
    """The signed 64-bit advisory-lock key PostgreSQL wants: 64 bits of a SHA-256 of
    ``digest`` (two digests share a key once in 2**32 pairs of concurrent submits only
    among billions; a shared key makes one submit wait for the other, nothing more)."""
    return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big", signed=True)


def submit_once(
    *,
    tokens: TokenStore,
    token: str,
    session_id: str,
    form: str,
    sessions: Sessions,
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    wait: float = 10.0,
    redis_down_fallback: bool = False,
    sender: object = None,
    fingerprint: str | None = None,
    fingerprint_of: Callable[[T], str | None] | None = None,
) -> Outcome[T]:
    """Consume ``token`` and run ``create`` in one transaction, at most once.

    Duplicates wait (at most ``wait`` seconds, holding no connection) for the
    request that holds the token, then get its result. ``sessions`` is a
    ``sessionmaker``, a ``scoped_session`` or a Flask-SQLAlchemy ``db`` (see
    the module docstring). ``sender`` is the sender of the
    :mod:`~submit_once.signals` this sends (``token_consumed``,
    ``submit_committed``).

    Redis and PostgreSQL unreachable before the token is consumed raise
    :class:`Unavailable` (the token is still good: show the form again with
    it), except that with ``redis_down_fallback`` an unreachable Redis at
    GETDEL hands the submit to the database alone (see the module docstring).
    Errors after the token is consumed are returned as :class:`Failed`, or as
    :class:`Unconfirmed` when nobody knows whether the COMMIT landed: the token is
    then put back, so that resubmitting it settles the question.

    ``fingerprint`` names what this submission *is* (see :func:`fingerprint`; store
    it with the row in ``create``) and ``fingerprint_of(result)`` reads it back: a
    duplicate whose fingerprint differs is :class:`Changed`, not :class:`Duplicate`.
    """
    digest = tokens.digest(token, session_id=session_id, form=form)
    outcome = run_once(
        digest=digest, take=lambda: tokens.consume_digest(digest),
        sessions=sessions, create=create, find=find, wait=wait,
        redis_down_fallback=redis_down_fallback, sender=sender,
        fingerprint=fingerprint, fingerprint_of=fingerprint_of,
    )
    if isinstance(outcome, Unconfirmed):
        restore(tokens, token, session_id=session_id, form=form)
    return outcome


def restore(tokens: TokenStore, token: str, *, session_id: str, form: str) -> None:
    """Put a spent token back (one ``SET NX EX``) after :class:`Unconfirmed`, the one
    case where that is right: resubmitting the same token then either places the row or
    meets the UNIQUE column and lands on it. :func:`submit_once` does this itself.

    Never after a known rollback (a fresh token is right there), never in a
    ``finally``. If Redis cannot be reached either, the token stays spent and the
    resubmit is told "expired" (logged here as a warning).
    """
    try:
        tokens.claim(token, session_id=session_id, form=form)
    except RedisError:
        log.warning("could not put token %s back after an unconfirmed COMMIT",
                    tokens.digest(token, session_id=session_id, form=form)[:12])


def run_once(
    *,
    digest: str,
    take: Callable[[], bool],
    sessions: Sessions,
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    wait: float = 10.0,
    redis_down_fallback: bool = False,
    sender: object = None,
    fingerprint: str | None = None,
    fingerprint_of: Callable[[T], str | None] | None = None,
) -> Outcome[T]:
    """:func:`submit_once` for any single-use mark named by ``digest``.

    ``take()`` is the one Redis command that hands the mark to one caller:
    GETDEL of an issued form token, or ``SET NX EX`` of a key the caller chose
    (an Idempotency-Key, a webhook event id; see ``TokenStore.claim``). The
    lock, the transaction, the signals and the outcomes are the same.
    """
    if (fingerprint is None) != (fingerprint_of is None):
        raise TypeError("pass fingerprint and fingerprint_of together: the one is what this "
                        "submission is, the other reads what the stored result was")
    answer = _Answer(fingerprint, fingerprint_of)
    attempt = _attempts(sessions)
    key = lock_key(digest)
    deadline = time.monotonic() + wait
    delay, waited = 0.005, False
    while True:
        with attempt() as db:
            try:
                locked = _begin_locked(db, key)
                if locked:
                    taken = _take(take, redis_down_fallback, digest)
                    if not taken:
                        existing = find(db, digest)
                        if existing is not None:
                            return answer.repeat(existing, waited)
                        if taken is False:
                            return Expired(waited)
            except _UNREACHABLE as error:
                raise Unavailable(f"{type(error).__name__} before the token was spent; "
                                  "it is still good") from error
            if locked:
                if token_consumed.receivers:  # no work when nobody listens
                    token_consumed.send(sender, digest=digest)
                return _create_once(db, digest, create, find, sender, answer)
        waited = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return StillRunning()
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)


class _Answer(Generic[T]):
    """What a request that finds a committed result gets: Duplicate, or Changed when
    its fingerprint is not the one stored with the result."""

    def __init__(self, fingerprint: str | None,
                 fingerprint_of: Callable[[T], str | None] | None) -> None:
        self.fingerprint, self.fingerprint_of = fingerprint, fingerprint_of

    def repeat(self, existing: T, waited: bool = False) -> Duplicate[T] | Changed[T]:
        if self.fingerprint_of is not None:
            stored = self.fingerprint_of(existing)
            if stored is not None and stored != self.fingerprint:
                return Changed(existing, waited)
        return Duplicate(existing, waited)


def fingerprint(values: Mapping[str, object]) -> str:
    """A 43-character digest of the fields that make a submission what it is.

    ``values`` maps each field's name to its value or list of values (say the
    quantity and the address of an order, not the CSRF token). Line endings are
    normalised (browsers send CRLF in a textarea), a list of one value is that value
    (a form field and the same JSON member agree), and the order of the names does
    not matter. Store it with the row; :func:`submit_once` compares it on every repeat.
    """
    canonical = json.dumps(
        {name: _canonical(value) for name, value in values.items()},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode()[:43]


def _canonical(value: object) -> object:
    if isinstance(value, str):
        return value.replace("\r\n", "\n").replace("\r", "\n")
    if isinstance(value, list | tuple):
        return _canonical(value[0]) if len(value) == 1 else [_canonical(v) for v in value]
    return value


def _take(take: Callable[[], bool], redis_down_fallback: bool, digest: str) -> bool | None:
    """The one Redis step: True (ours), False (not ours), None (unknown: Redis is
    unreachable and ``redis_down_fallback`` lets the database decide)."""
    try:
        return take()
    except (RedisConnectionError, RedisTimeoutError):
        if not redis_down_fallback:
            raise
        # A timeout may even have taken the mark: either way the lock we hold
        # and the UNIQUE column decide from here on.
        log.warning("Redis unreachable at consume; token %s is checked by the "
                    "database alone", digest[:12])
        return None


def _create_once(
    db: Session,
    digest: str,
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    sender: object,
    answer: _Answer[T],
) -> Outcome[T]:
    """The token is ours: run the transaction. Only explicit failures are
    handled here; anything else (including KeyboardInterrupt, SystemExit or a
    worker being killed) leaves the token consumed and the transaction rolled
    back by the connection closing, which is the safe side."""
    try:
        result = create(db, digest)
        db.commit()
    except IntegrityError as error:
        # The UNIQUE digest column: the token was consumed before and Redis
        # forgot (failover, restore). The row that exists is the answer.
        db.rollback()
        existing = find(db, digest)
        if existing is None:
            return Failed(error)
        log.warning("token %s came back in Redis; the unique constraint held", digest[:12])
        return answer.repeat(existing)
    except (Refused, SQLAlchemyError) as error:
        with suppress(SQLAlchemyError):  # the connection may be what failed
            db.rollback()
        if isinstance(error, OperationalError) and error.connection_invalidated:
            return Unconfirmed(error)
        return Failed(error)
    if submit_committed.receivers:
        submit_committed.send(sender, digest=digest, result=result)
    return Created(result)


def _begin_locked(db: Session, key: int) -> bool:
    """Start the attempt's transaction holding the advisory lock on ``key``, if free."""
    return bool(db.connection().exec_driver_sql(_TRY_LOCK, {"key": key}).scalar())


def _attempts(sessions: Sessions) -> Callable[[], AbstractContextManager[Session]]:
    """A context manager per attempt, giving the session the attempt runs in."""
    scoped = sessions if isinstance(sessions, scoped_session) else \
        getattr(sessions, "session", None)
    if not isinstance(scoped, scoped_session):
        if isinstance(sessions, sessionmaker):
            # A new Session each time; leaving it closes it. What create or find returns
            # (an ORM object, say) is read after that: its attributes must not expire at
            # the COMMIT, or the first touch outside the session would fail.
            maker = sessions
            return lambda: maker(expire_on_commit=False)
        raise TypeError("sessions must be a sessionmaker, a scoped_session or a "
                        f"Flask-SQLAlchemy SQLAlchemy object, not {type(sessions).__name__}")
    db: Session = scoped()
    if _unsaved_work(db):
        raise RuntimeError(
            "The request's session has unsaved changes; submit_once runs its own "
            "transaction in that session. Commit or roll them back before the call, "
            "or make them inside create().")
    # The view's reads end here, so this request holds no connection while it
    # waits; its objects stay attached to the session (nothing is closed).
    db.rollback()

    @contextmanager
    def in_request_session() -> Iterator[Session]:
        try:
            yield db
        finally:
            if db.in_transaction():
                db.rollback()  # ends the attempt (and its lock), keeps the session open
    return in_request_session


def _unsaved_work(db: Session) -> bool:
    if db.new or db.deleted or any(db.is_modified(obj) for obj in db.dirty):
        return True
    # Flushed (or written with plain SQL) and not committed: PostgreSQL gives a
    # transaction an id at its first write, and only then.
    return db.in_transaction() and bool(db.connection().exec_driver_sql(_WROTE).scalar())
