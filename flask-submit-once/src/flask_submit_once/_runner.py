"""Run a submit's transaction once per mark, and tell every repeat what happened.

Framework-free: it works in one SQLAlchemy session bound to PostgreSQL (the request's)
with two callables, ``create(db, digest)`` (add the row, with the digest in a UNIQUE
column) and ``find(db, digest)`` (the row an earlier submit made, or None), each giving a
:class:`Landing`. Every submit runs::

    SELECT pg_try_advisory_xact_lock(k)   k from the digest, in the session's transaction
      false: another request holds this mark right now -> ROLLBACK, wait, retry
    take()  the one Redis step: GETDEL of an issued token, or SET NX of a claimed key
      got it:  create(db, digest); COMMIT  -> created
      missed:  find(db, digest)            -> duplicate or changed; none: expired
    ROLLBACK

The lock is what tells "the first submit is still running" from "there never was one":
whoever takes it after the first sees its COMMIT or its ROLLBACK, never the gap between.
Waiters hold no connection while they wait (5 ms, doubling to 100 ms, within ``wait``).
Anything read from a row is read inside the transaction (:class:`Landing`), so nothing is
touched after it on a session that may expire or close it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any, NamedTuple

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from . import signals
from ._errors import Refused, Unavailable
from ._outcome import Outcome

__all__ = ["UNREACHABLE", "Landing", "lock_key", "run_once"]

log = logging.getLogger("flask_submit_once")

#: What "unreachable" means: a Redis error, a lost or refused PostgreSQL connection (or a
#: lock or statement timeout), or an empty pool.
UNREACHABLE = (RedisError, OperationalError, PoolTimeout)

#: The lock, and whether this transaction wrote already (PostgreSQL gives a transaction
#: an id at its first write, and only then): flushed work the app left in the session.
_TRY_LOCK = (
    "SELECT pg_try_advisory_xact_lock(%(key)s), pg_current_xact_id_if_assigned() IS NOT NULL"
)
_UNSAVED = (
    "The session has unsaved changes before the submit's own transaction: make "
    "them in the view, where they commit once with the token."
)


class Landing(NamedTuple):
    """A committed result as read inside its transaction: the result, where it is shown,
    the fingerprint stored with it, and what its answer shows (made there too)."""

    result: Any
    url: str | None = None
    fingerprint: str | None = None
    shown: Any = None


def lock_key(digest: str) -> int:
    """The signed 64-bit advisory-lock key of ``digest`` (two digests sharing one makes
    one submit wait for the other, nothing more)."""
    return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big", signed=True)


def run_once(
    db: Session,
    *,
    digest: str,
    take: Callable[[], bool],
    create: Callable[[Session, str], Landing],
    find: Callable[[Session, str], Landing | None],
    wait: float,
    fingerprint: str | None = None,
    redis_down_fallback: bool = False,
    takeover: bool = False,
    sender: object = None,
) -> Outcome:
    """Take the mark ``digest`` names with ``take()`` and run ``create`` once.

    Raises :class:`Unavailable` when Redis or PostgreSQL does not answer before the mark
    is taken (nothing spent). With ``redis_down_fallback``, Redis unreachable at
    ``take()`` lets the lock and the UNIQUE column decide alone. With ``takeover`` (a
    claimed key), a mark already taken whose row does not exist, found while holding the
    lock, is a claim whose request died: this one goes on with it.
    """
    key = lock_key(digest)
    deadline = time.monotonic() + wait
    delay, waited = 0.005, False
    if db.new or db.dirty or db.deleted:
        raise RuntimeError(_UNSAVED)
    while True:
        try:
            locked, wrote = db.connection().exec_driver_sql(_TRY_LOCK, {"key": key}).one()
            if wrote:  # only the first attempt can find any: each one ends in a ROLLBACK
                raise RuntimeError(_UNSAVED)
            if locked:
                taken = _take(take, redis_down_fallback, digest)
                if not taken:
                    existing = find(db, digest)
                    if existing is not None:
                        db.rollback()
                        return _repeat(existing, fingerprint, waited)
                    if taken is False and not takeover:
                        db.rollback()
                        return Outcome("expired", waited=waited)
            else:  # ends the attempt: this request holds no connection while it waits
                db.rollback()
        except UNREACHABLE as error:
            with suppress(SQLAlchemyError):
                db.rollback()
            raise Unavailable() from error
        if locked:
            if signals.token_consumed.receivers:
                signals.token_consumed.send(sender, digest=digest)
            return _create_once(db, digest, create, find, fingerprint, sender)
        waited = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome("still_running", waited=True)
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)


def _repeat(existing: Landing, fingerprint: str | None, waited: bool) -> Outcome:
    changed = (
        fingerprint is not None
        and existing.fingerprint is not None
        and existing.fingerprint != fingerprint
    )
    return Outcome(
        "changed" if changed else "duplicate",
        existing.result,
        waited,
        url=existing.url,
        shown=existing.shown,
    )


def _take(take: Callable[[], bool], redis_down_fallback: bool, digest: str) -> bool | None:
    """The one Redis step: True (ours), False (not ours), None (Redis is unreachable and
    ``redis_down_fallback`` lets the database decide)."""
    try:
        return take()
    except (RedisConnectionError, RedisTimeoutError):
        if not redis_down_fallback:
            raise
        # A timeout may even have taken the mark: the lock and the UNIQUE column decide.
        log.warning(
            "Redis unreachable at consume; %s is checked by the database alone", digest[:12]
        )
        return None


def _create_once(
    db: Session,
    digest: str,
    create: Callable[[Session, str], Landing],
    find: Callable[[Session, str], Landing | None],
    fingerprint: str | None,
    sender: object,
) -> Outcome:
    """The mark is ours: run the transaction. Anything not handled here (an HTTP error the
    view raised, a KeyboardInterrupt) rolls back and propagates, the mark staying spent."""
    try:
        landing = create(db, digest)
        db.commit()
    except IntegrityError as error:
        # The UNIQUE digest: the mark was taken before and Redis forgot (a failover).
        db.rollback()
        existing = find(db, digest)
        db.rollback()
        if existing is None:
            return Outcome("failed", error=error)
        log.warning("%s came back in Redis; the unique constraint held", digest[:12])
        return _repeat(existing, fingerprint, False)
    except Refused as refused:
        db.rollback()
        return Outcome("refused", error=refused)
    except SQLAlchemyError as error:
        with suppress(SQLAlchemyError):  # the connection may be what failed
            db.rollback()
        if isinstance(error, OperationalError) and error.connection_invalidated:
            return Outcome("unconfirmed", error=error)
        return Outcome("failed", error=error)
    except BaseException:
        with suppress(SQLAlchemyError):
            db.rollback()
        raise
    if signals.submit_committed.receivers:
        signals.submit_committed.send(sender, digest=digest, result=landing.result)
    return Outcome("created", landing.result, url=landing.url, shown=landing.shown)
