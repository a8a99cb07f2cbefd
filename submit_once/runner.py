"""Run a submit's transaction once per token, and tell every duplicate what happened.

This is the one place that decides what a submit sees. It is framework-free: it
takes a :class:`~submit_once.tokens.TokenStore`, a SQLAlchemy ``sessionmaker`` bound
to PostgreSQL, and two callables of yours::

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

Why the lock comes *before* GETDEL: a request that misses on GETDEL must tell
"the first one is still running" from "there never was a first one". The
consumer holds the lock from before its GETDEL until its commit, so whoever
gets the lock after a miss sees either the committed row or a rollback.

Why waiting does not hold a connection: a storm of duplicates would otherwise
empty the pool while the one request that matters needs it. Waiters poll the
lock with short transactions and sleep in between, up to a bound.

Why the UNIQUE column is still there: if Redis loses a delete (a failover to a
replica that never saw the GETDEL) a consumed token comes back; the insert then
fails on the constraint and the submit is answered like any duplicate.

With ``redis_down_fallback`` and Redis unreachable at GETDEL, the lock and the
UNIQUE column carry the submit alone (``find``, then ``create``): nothing is
doubled, but an expired token is no longer told from a live one.

Nothing here cleans up in a ``finally``: an interrupted request (killed worker,
timeout) never restores or deletes a token; the next submit reads what happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Generic, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from .tokens import TokenStore

__all__ = [
    "Created", "Duplicate", "Expired", "Failed", "Refused", "StillRunning", "run_once",
    "submit_once",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


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
class StillRunning:
    """The request holding the token ran past the wait bound. Resubmitting the
    same token later is safe: it lands on the result or on Expired."""


Outcome = Created[T] | Duplicate[T] | Expired | Failed | StillRunning


# Plain SQL built once: a Core select() rebuilt per call took 0.9 ms of CPU here
# against 0.6 ms (bench/profile.py), on every submit.
_TRY_LOCK = text("SELECT pg_try_advisory_xact_lock(:key)")


def lock_key(digest: str) -> int:
    """The signed 64-bit advisory-lock key PostgreSQL wants, from a token digest."""
    return int.from_bytes(digest.encode()[:8], "big", signed=True)


def submit_once(
    *,
    tokens: TokenStore,
    token: str,
    session_id: str,
    form: str,
    sessions: sessionmaker[Session],
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    wait: float = 10.0,
    redis_down_fallback: bool = False,
    after_consume: Callable[[], None] | None = None,
    after_commit: Callable[[], None] | None = None,
) -> Outcome[T]:
    """Consume ``token`` and run ``create`` in one transaction, at most once.

    Duplicates wait (at most ``wait`` seconds, holding no connection) for the
    request that holds the token, then get its result. ``after_consume`` runs
    between GETDEL and ``create``, ``after_commit`` right after the commit;
    tests use them to widen those windows or to kill the process there.

    Redis and PostgreSQL errors raised before the token is consumed propagate
    (the token is still good: show the form again with it), except that with
    ``redis_down_fallback`` an unreachable Redis at GETDEL hands the submit to
    the database alone (see the module docstring). Errors after the token is
    consumed are returned as :class:`Failed`.
    """
    digest = tokens.digest(token, session_id=session_id, form=form)
    return run_once(
        digest=digest, take=lambda: tokens.consume(token, session_id=session_id, form=form),
        sessions=sessions, create=create, find=find, wait=wait,
        redis_down_fallback=redis_down_fallback, after_take=after_consume,
        after_commit=after_commit,
    )


def run_once(
    *,
    digest: str,
    take: Callable[[], bool],
    sessions: sessionmaker[Session],
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    wait: float = 10.0,
    redis_down_fallback: bool = False,
    after_take: Callable[[], None] | None = None,
    after_commit: Callable[[], None] | None = None,
) -> Outcome[T]:
    """:func:`submit_once` for any single-use mark named by ``digest``.

    ``take()`` is the one Redis command that hands the mark to one caller:
    GETDEL of an issued form token, or ``SET NX EX`` of a key the caller chose
    (an Idempotency-Key, a webhook event id; see ``TokenStore.claim``). The
    lock, the transaction and the outcomes are the same.
    """
    key = lock_key(digest)
    deadline = time.monotonic() + wait
    delay, waited = 0.005, False
    while True:
        with sessions() as db:
            if db.scalar(_TRY_LOCK, {"key": key}):
                try:
                    taken = take()
                except (RedisConnectionError, RedisTimeoutError):
                    if not redis_down_fallback:
                        raise
                    # A timeout may even have taken the mark: either way the
                    # lock we hold and the UNIQUE column decide from here on.
                    log.warning("Redis unreachable at consume; token %s is checked by the "
                                "database alone", digest[:12])
                    taken = None  # unknown: the database decides
                if not taken:
                    existing = find(db, digest)
                    if existing is not None:
                        return Duplicate(existing, waited)
                    if taken is False:
                        return Expired(waited)
                if after_take is not None:
                    after_take()
                return _create_once(db, digest, create, find, after_commit)
        waited = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return StillRunning()
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)


def _create_once(
    db: Session,
    digest: str,
    create: Callable[[Session, str], T],
    find: Callable[[Session, str], T | None],
    after_commit: Callable[[], None] | None = None,
) -> Outcome[T]:
    """The token is ours: run the transaction. Only explicit failures are
    handled here; anything else (including KeyboardInterrupt, SystemExit or a
    worker being killed) leaves the token consumed and the transaction rolled
    back by the connection closing, which is the safe side."""
    try:
        result = create(db, digest)
        db.commit()
        if after_commit is not None:
            after_commit()
        return Created(result)
    except IntegrityError as error:
        # The UNIQUE digest column: the token was consumed before and Redis
        # forgot (failover, restore). The row that exists is the answer.
        db.rollback()
        existing = find(db, digest)
        if existing is None:
            return Failed(error)
        log.warning("token %s came back in Redis; the unique constraint held", digest[:12])
        return Duplicate(existing)
    except (Refused, SQLAlchemyError) as error:
        with suppress(SQLAlchemyError):  # the connection may be what failed
            db.rollback()
        return Failed(error)
