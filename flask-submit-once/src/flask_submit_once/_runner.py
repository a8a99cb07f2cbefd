"""The once-only core: the lock, the one Redis step, the row, the COMMIT, and the step
outside the database; every repeat told what happened.

A submit's digest is consumed once through a :class:`Consumable`: an issued token by its
``GETDEL``, a signed token or a caller's key by claiming its digest (``SET NX EX``). The
runner works in one SQLAlchemy session (the request's) with two callables,
``create(db, digest)`` (add the row, with the digest in a UNIQUE column) and
``find(db, digest)`` (the row an earlier submit made, or None), each giving a
:class:`Committed`. Every submit runs::

    the lock of k (k from the digest), in the session's transaction
      not had: another request holds it right now -> ROLLBACK, wait, retry
    consume()  the one Redis step: GETDEL of an issued token, or SET NX of a claimed key
      got it:  create(db, digest); COMMIT  -> created
               an edit from another version than the row's -> stale (digest restored)
      missed:  find(db, digest)            -> duplicate or changed; none: expired
    ROLLBACK

The lock is what tells "the first submit is still running" from "there never was one":
whoever takes it after the first sees its COMMIT or its ROLLBACK, never the gap between.
Waiters hold no connection while they wait (5 ms, doubling to 100 ms, within ``wait``).
The lock is the database's (:class:`Locking`, one per dialect): on PostgreSQL an advisory
lock of the transaction, one per digest; on SQLite the database's one writer lock, taken by
``BEGIN IMMEDIATE``, so that submits of every form take turns there; on MariaDB a named lock
(``GET_LOCK``) per digest, released as the connection goes back to the pool.
Anything read from a row is read inside the transaction (:class:`Committed`), so nothing is
touched after it on a session that may expire or close it.

**A step outside the database, once per submission**: after the row, before the answer.

A form whose submit must also do something elsewhere (charge a card, book a seat at a
partner) names it: ``@submit_once.form(..., then=charge)``. The row is committed first,
marked with the step still to do (``submission_step``), so that a crash, a timeout or a
kill anywhere after it leaves a row that says what is next::

    transaction 1   lock, GETDEL, the view's row (submission_step = "charge"), COMMIT
    the lease       UPDATE row SET lease owner = me, until = now + lease
                    WHERE its step is still "charge" AND nobody's lease runs; COMMIT
    the step        then(db, row, key): the call elsewhere, with an idempotency key made
                    from the submission's digest (never from anything a client chose);
                    no transaction open, the lease renewed every third of its length
    transaction 2   what it wrote, submission_step = NULL (or "refused"), the lease
                    ended WHERE it is still mine; COMMIT

Whoever holds the lease does the step: the request that made the row, a repeat of it that
finds the row still marked (a double click, Back + submit, a retry), or the sweeper
(:meth:`SubmitOnce.resume <flask_submit_once.SubmitOnce.resume>`, ``flask submit-once
resume``). Its key is the same every time, so the other side answers a repeat with what
it did the first time. The lease is a row's, not a connection's: it holds behind a pooler
by transaction, and a holder killed leaves it to run out (``SUBMIT_ONCE_STEP_LEASE_SECONDS``),
after which the next holder takes it. A repeat waits for it as it waits for a submit in
flight, holding no connection. ``then`` raising :class:`~flask_submit_once.Refused` (a card
declined) commits what it wrote and marks the row "refused": the user gets the form again
with their input and a fresh token. Any other exception rolls back and leaves the row
marked: the user is told it could not be confirmed, and the next holder tries again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import Connection, Engine, event, inspect, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from . import signals
from ._answers import Outcome
from ._errors import FormTokenError, Refused, UnavailableError, cause_of
from ._issuing import is_signed, session_id
from ._model import (
    SUPPORTED_DATABASES,
    Sessions,
    Stale,
    SubmissionMixin,
    check_database,
    new_session,
)
from ._tokens import TokenStore

if TYPE_CHECKING:
    from ._extension import State

__all__ = [
    "REFUSED",
    "UNREACHABLE",
    "Committed",
    "Consumable",
    "Lease",
    "LeaseLost",
    "NotIssued",
    "Step",
    "Then",
    "lock_key",
    "locking",
    "refuse_steps_on",
    "resume_all",
    "run_once",
    "step_outcome",
    "status",
    "step_key",
]

log = logging.getLogger("flask_submit_once")

#: What "unreachable" means: a Redis error, a lost or refused database connection (or a
#: lock or statement timeout), or an empty pool.
UNREACHABLE = (RedisError, OperationalError, PoolTimeout)

_UNSAVED = (
    "The session has unsaved changes before the submit's own transaction: make "
    "them in the view, where they commit once with the token."
)


class Committed(NamedTuple):
    """A committed result as read inside its transaction: the result, where it is shown,
    the fingerprint stored with it, and what its answer shows (made there too)."""

    result: Any
    url: str | None = None
    fingerprint: str | None = None
    shown: Any = None


class NotIssued(Exception):
    """A token that does not prove it was issued for this session and form (its MAC): a
    made-up one, another session's or form's, or a signed token's nonce sent bare.
    Answered as an expired form, before the form is validated or anything consumed."""


class Consumable:
    """How a submit's digest is consumed, and restored. An issued token is consumed by its
    ``GETDEL`` and restored by claiming its digest again (after an unconfirmed COMMIT, so
    that resubmitting it tells what happened); a signed token (drawn while Redis was
    away) and a caller's key are consumed by claiming their digest and restored by
    deleting it. With ``accept_when_redis_away``, Redis unreachable at :meth:`consume` lets
    the lock and the UNIQUE column decide alone (a signed token always may: it was drawn
    without Redis)."""

    def __init__(
        self,
        store: TokenStore,
        digest: str,
        how: Literal["issued", "claimed", "spent"],
        *,
        accept_when_redis_away: bool,
        ttl: int | None = None,
    ) -> None:
        self.store, self.digest, self.how = store, digest, how
        self.accept_when_redis_away, self.ttl = accept_when_redis_away, ttl

    @classmethod
    def of(cls, state: State, token: str, name: str) -> Consumable:
        """How ``token``, submitted to the form ``name`` in this session, is consumed:
        :class:`~flask_submit_once.FormTokenError` for a signed token when the app signs
        none, ``SignedExpired`` for one too old or bound elsewhere, :class:`NotIssued`
        for a token whose MAC does not verify (checked here, without Redis, so that a
        submit accepted while Redis is away still takes only tokens issued)."""
        sid = session_id()
        store = state.store
        if not is_signed(token):
            if not store.verify(token, session_id=sid, form=name):
                raise NotIssued()
            digest = store.digest(token, session_id=sid, form=name)
            return cls(store, digest, "issued", accept_when_redis_away=state.accept_when_redis_away)
        if state.signed is None:
            raise FormTokenError()
        nonce = state.signed.nonce(token, session_id=sid, form=name)
        digest = store.digest(nonce, session_id=sid, form=name)
        return cls(store, digest, "claimed", accept_when_redis_away=True)

    def is_spent(self) -> bool:
        """Whether the digest is used up already (one ``EXISTS``): an issued token no
        longer held (consumed or expired), a claimed one held. A hint read before
        something costly; only :meth:`consume` decides. While Redis is away its error
        propagates, unless ``accept_when_redis_away``: then False, the database decides."""
        try:
            held = self.store.holds(self.digest)
        except (RedisConnectionError, RedisTimeoutError):
            if not self.accept_when_redis_away:
                raise
            return False
        return not held if self.how == "issued" else held

    def spent(self) -> Consumable:
        """This digest, seen used up before its form was validated: its :meth:`consume`
        sends nothing and misses, so the runner only finds what the submit that spent
        it made (waiting for it while it runs), and never runs ``create`` for a form
        that was not validated, even if the token comes back meanwhile (restored after
        an unconfirmed COMMIT)."""
        return Consumable(self.store, self.digest, "spent", accept_when_redis_away=False)

    def consume(self) -> bool:
        """The one Redis step: True for exactly one caller."""
        if self.how == "issued":
            return self.store.consume_digest(self.digest)
        if self.how == "spent":
            return False
        return self.store.claim(self.digest, ttl=self.ttl)

    def restore(self) -> None:
        """Make the digest consumable again."""
        if self.how == "issued":
            self.store.claim(self.digest)
        elif self.how == "claimed":
            self.store.release(self.digest)


# The lock, by database


class Locking:
    """How one database holds the lock of a submit's digest for the length of the session's
    transaction. Chosen by :func:`locking` from the dialect's name."""

    #: Whether a form's step outside the database (``then=``) can hold its lock there.
    steps = True

    def take(self, conn: Connection, key: int) -> tuple[bool, bool]:
        """(whether this transaction now holds the lock of ``key``, whether it had written
        already: flushed work the app left in the session)."""
        raise NotImplementedError

    def check(self, conn: Connection) -> None:
        """Refuse, once a connection, a setting under which the lock would not hold."""


class PostgresLocking(Locking):
    """An advisory lock of the transaction, one per digest: submits of other forms never
    wait for it. PostgreSQL gives a transaction an id at its first write, and only then."""

    TRY = "SELECT pg_try_advisory_xact_lock(%(key)s), pg_current_xact_id_if_assigned() IS NOT NULL"

    def take(self, conn: Connection, key: int) -> tuple[bool, bool]:
        locked, wrote = conn.exec_driver_sql(self.TRY, {"key": key}).one()
        return bool(locked), bool(wrote)


class SQLiteLocking(Locking):
    """The database's one writer lock, taken by ``BEGIN IMMEDIATE``: a submit holds it from
    before its Redis step to its COMMIT, so a duplicate (in this process or another on the
    host) that takes it next reads the first one's row. It is every form's lock at once:
    submits of all forms take turns.

    It is tried without SQLite's busy handler (``busy_timeout`` 0 for that one statement),
    so that a waiter waits as on PostgreSQL: in the runner, holding no connection, within
    its ``wait``, and knowing that it waited. The transaction is begun here, and only this
    one: pysqlite's own handling (the default) opens none for reads and a deferred one
    before a write, so the app's other transactions are left as they are. A deferred one
    would not do: in WAL mode its first write fails at once, whatever the busy timeout,
    when another writer committed since its first read.
    """

    steps = False
    #: The connection's own busy timeout, read once (its pool record's ``info``).
    TIMEOUT = "flask_submit_once.sqlite_busy_timeout"

    def take(self, conn: Connection, key: int) -> tuple[bool, bool]:
        driver: Any = conn.connection.driver_connection
        # pysqlite opens a transaction before a write, and only then.
        if driver.in_transaction:
            return False, True
        conn.exec_driver_sql("PRAGMA busy_timeout = 0")
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        except OperationalError as error:
            # Another writer holds it (SQLITE_BUSY): wait as for a submit in flight.
            code = getattr(error.orig, "sqlite_errorcode", None)
            if code is not None and code & 0xFF == sqlite3.SQLITE_BUSY:
                return False, False
            raise
        finally:
            timeout = int(conn.connection.info[self.TIMEOUT])
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {timeout}")
        return True, False

    def check(self, conn: Connection) -> None:
        if self.TIMEOUT in conn.connection.info:
            return
        driver: Any = conn.connection.driver_connection
        # Python 3.12's autocommit attribute; before it, every connection is "legacy".
        legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", -1)
        own_handling = driver.isolation_level is not None
        if conn.dialect.driver != "pysqlite" or not own_handling:
            raise RuntimeError(_SQLITE_TRANSACTIONS)
        if getattr(driver, "autocommit", legacy) != legacy:
            raise RuntimeError(_SQLITE_TRANSACTIONS)
        files = conn.exec_driver_sql("PRAGMA database_list").all()
        if not any(name == "main" and file for _, name, file in files):
            raise RuntimeError(_SQLITE_MEMORY)
        timeout = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
        conn.connection.info[self.TIMEOUT] = timeout


_SQLITE_TRANSACTIONS = (
    "Flask-Submit-Once begins each submit's SQLite transaction itself (BEGIN IMMEDIATE) and "
    "needs pysqlite's own transaction handling, the default: this engine's connections begin "
    "transactions otherwise (isolation_level=None, autocommit, a 'begin' event, or another "
    "driver). Use create_engine('sqlite:///path') without them."
)
_SQLITE_MEMORY = (
    "Flask-Submit-Once needs an SQLite database in a file: an in-memory one is a database per "
    "connection, or one connection shared by every request, and neither holds a lock between "
    "requests. Use sqlite:///path/to/app.db (in tests, a file in pytest's tmp_path)."
)


class MariaDBLocking(Locking):
    """A named lock (``GET_LOCK``), one per digest: submits of other forms never wait for it.

    A named lock belongs to the server's session, the connection, not to the transaction: it
    would outlive the COMMIT, and go back to the pool held. So it is released when its
    connection goes back to the pool (after the session's COMMIT or ROLLBACK, on every path
    of the runner), by a ``checkin`` listener on the engine's pool; a connection that cannot
    release it is thrown away, and the server ends its session and the lock with it, as it
    does for a worker killed inside its transaction.

    Each transaction must see what another committed while it waited, so the connection's
    isolation is READ COMMITTED: under InnoDB's REPEATABLE READ, a read made earlier in the
    same transaction (a validator's) fixes the snapshot, and a duplicate that takes the
    lock as the first submit commits would not see its row (answered "expired"). Checked
    once a connection. MariaDB tells no unprivileged session whether its transaction has
    written, so the check for flushed work the app left is the session's alone.
    """

    #: The named locks a pooled connection holds (its pool record's ``info``).
    HELD = "flask_submit_once.mariadb_locks"
    CHECKED = "flask_submit_once.mariadb_checked"

    def take(self, conn: Connection, key: int) -> tuple[bool, bool]:
        name = f"flask_submit_once:{key}"
        got = conn.exec_driver_sql("SELECT GET_LOCK(%(name)s, 0)", {"name": name}).scalar()
        if got != 1:
            return False, False
        conn.connection.info.setdefault(self.HELD, []).append(name)
        return True, False

    def check(self, conn: Connection) -> None:
        if not event.contains(conn.engine, "checkin", _release_named_locks):
            event.listen(conn.engine, "checkin", _release_named_locks)
        level = conn.get_execution_options().get("isolation_level")
        if level is None and not conn.connection.info.get(self.CHECKED):
            level = conn.get_isolation_level()
        if level is not None and level != "READ COMMITTED":
            raise RuntimeError(_MARIADB_ISOLATION.format(level=level))
        conn.connection.info[self.CHECKED] = True


def _release_named_locks(dbapi_connection: Any, record: Any) -> None:
    """Release the named locks a connection took for submits, as it goes back to the pool."""
    names = record.info.pop(MariaDBLocking.HELD, None)
    if not names or dbapi_connection is None:
        return
    try:
        with dbapi_connection.cursor() as cursor:
            for name in names:
                cursor.execute("DO RELEASE_LOCK(%s)", (name,))
    except Exception:
        # Never pooled holding one: closed, its server session ends and the lock with it.
        record.invalidate()


_MARIADB_ISOLATION = (
    "Flask-Submit-Once needs MariaDB's READ COMMITTED isolation (this connection's is "
    "{level}): under REPEATABLE READ, the default, a duplicate submit can miss the row the "
    "first one committed while it waited. Use create_engine(url, isolation_level='READ "
    "COMMITTED') (Flask-SQLAlchemy: SQLALCHEMY_ENGINE_OPTIONS = {{'isolation_level': "
    "'READ COMMITTED'}})."
)

#: The databases the lock is made for, by dialect name (their names for people:
#: SUPPORTED_DATABASES).
LOCKINGS: dict[str, Locking] = {
    "postgresql": PostgresLocking(),
    "sqlite": SQLiteLocking(),
    "mariadb": MariaDBLocking(),
}


def locking(conn: Connection) -> Locking:
    """The lock of ``conn``'s database, checked on this connection."""
    check_database(conn)
    found = LOCKINGS[conn.dialect.name]
    found.check(conn)
    return found


def refuse_steps_on(bind: Engine | Connection) -> None:
    """Refuse a step outside the database (``then=``) where its lock cannot be held:
    before anything is consumed, rather than a row committed whose step never runs."""
    name = bind.dialect.name
    if name in LOCKINGS and not LOCKINGS[name].steps:
        raise RuntimeError(
            f"then= is not supported on {SUPPORTED_DATABASES[name]} yet: the lease that guards "
            "the step outside the database is tested on PostgreSQL and MariaDB only. Run forms "
            "with then= on one of them, or do the step in the view."
        )


def lock_key(digest: str) -> int:
    """The signed 64-bit advisory-lock key of ``digest`` (two digests sharing one makes
    one submit wait for the other, nothing more)."""
    return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big", signed=True)


def run_once(
    db: Session,
    consumable: Consumable,
    *,
    create: Callable[[Session, str], Committed],
    find: Callable[[Session, str], Committed | None],
    wait: float,
    fingerprint: str | None = None,
    takeover: bool = False,
    sender: object = None,
) -> Outcome:
    """Consume ``consumable`` (its digest) and run ``create`` once.

    Raises :class:`UnavailableError` when Redis or the database does not answer before the digest
    is consumed (nothing used up). With ``takeover`` (a claimed key), a key already
    claimed whose row does not exist, found while holding the lock, is a claim whose request
    died: this one goes on with it.
    """
    digest = consumable.digest
    key = lock_key(digest)
    deadline = time.monotonic() + wait
    delay, waited = 0.005, False
    if db.new or db.dirty or db.deleted:
        raise RuntimeError(_UNSAVED)
    while True:
        try:
            conn = db.connection()
            locked, wrote = locking(conn).take(conn, key)
            if wrote:
                # Flushed work the app left: only the first attempt can find any, since
                # each attempt ends in a ROLLBACK.
                raise RuntimeError(_UNSAVED)
            if locked:
                consumed = _consume(consumable)
                if not consumed:
                    existing = find(db, digest)
                    if existing is not None:
                        db.rollback()
                        return _repeat(existing, fingerprint, waited)
                    if consumed is False and not takeover:
                        db.rollback()
                        return Outcome("expired", waited=waited)
            else:
                # Not locked: end the attempt, so that this request holds no connection while it
                # waits.
                db.rollback()
        except UNREACHABLE as error:
            with suppress(SQLAlchemyError):
                db.rollback()
            raise UnavailableError() from error
        if locked:
            if signals.token_consumed.receivers:
                signals.token_consumed.send(sender, digest=digest)
            return _create_once(db, consumable, create, find, fingerprint, sender)
        waited = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome("still_running", waited=True)
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)


def status(
    db: Session, digest: str, find: Callable[[Session, str], Committed | None]
) -> tuple[str, str | None]:
    """What became of the submit of ``digest``, with nothing consumed: ``done`` (and where),
    ``running`` (another request holds its lock), or ``not_done`` (nothing was made:
    submitting it is safe)."""
    try:
        conn = db.connection()
        free, _ = locking(conn).take(conn, lock_key(digest))
        found = find(db, digest) if free else None
    finally:
        db.rollback()
    if found is not None:
        return "done", found.url
    return ("not_done" if free else "running"), None


def _repeat(existing: Committed, fingerprint: str | None, waited: bool) -> Outcome:
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


def _consume(consumable: Consumable) -> bool | None:
    """The one Redis step: True (ours), False (not ours), None (Redis is unreachable and
    ``accept_when_redis_away`` lets the database decide)."""
    try:
        return consumable.consume()
    except (RedisConnectionError, RedisTimeoutError):
        if not consumable.accept_when_redis_away:
            raise
        # A timeout may even have consumed the digest: the lock and the UNIQUE column decide.
        log.warning(
            "Redis unreachable at consume; %s is checked by the database alone",
            consumable.digest[:12],
        )
        return None


def _create_once(
    db: Session,
    consumable: Consumable,
    create: Callable[[Session, str], Committed],
    find: Callable[[Session, str], Committed | None],
    fingerprint: str | None,
    sender: object,
) -> Outcome:
    """The digest is ours: run the transaction. Anything not handled here (an HTTP error
    the view raised, a KeyboardInterrupt) rolls back and propagates, the digest staying
    consumed."""
    digest = consumable.digest
    try:
        committed = create(db, digest)
        db.commit()
    except IntegrityError as error:
        # The UNIQUE digest: it was consumed before and Redis forgot (a failover).
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
    except Stale as stale:
        # An edit from a page drawn before another edit landed, or racing one: nothing
        # written. The digest is made good again before the lock goes with the ROLLBACK,
        # so that a repeat of this submit is told the same, not "expired".
        with suppress(RedisError):
            consumable.restore()
        db.rollback()
        return Outcome("stale", stale.row, error=stale)
    except SQLAlchemyError as error:
        with suppress(SQLAlchemyError):
            # The connection may be what failed.
            db.rollback()
        if isinstance(error, OperationalError) and error.connection_invalidated:
            return Outcome("unconfirmed", error=error)
        return Outcome("failed", error=error)
    except BaseException:
        with suppress(SQLAlchemyError):
            db.rollback()
        raise
    if signals.submit_committed.receivers:
        signals.submit_committed.send(sender, digest=digest, result=committed.result)
    return Outcome("created", committed.result, url=committed.url, shown=committed.shown)


# A step outside the database

#: What submission_step holds once the step refused the submission.
REFUSED = "refused"

Then = Callable[[Session, Any, str], None]


def step_key(digest: str, name: str) -> str:
    """The idempotency key the step sends elsewhere: 43 characters made from the
    submission's digest and the step's name."""
    material = f"flask-submit-once step\x00{name}\x00{digest}".encode()
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:43]


class LeaseLost(Exception):
    """The step's lease ran out and another holder took it before this one recorded what
    it did: nothing of it is recorded, the other holder does the step again with the same
    key."""


class Lease:
    """Who does the step of one row now: ``submission_step_lease_owner`` until
    ``submission_step_lease_until``, taken by one conditional UPDATE committed at once.

    It is a row, not a session, so it holds on any database and behind a pooler that
    pools by transaction (PgBouncer): no connection is kept while the step runs. Its
    holder renews it while the step runs (:meth:`kept`) and ends it in the transaction that
    records what the step did; a holder killed leaves it to run out, and the next one takes
    it then. Both sides of every comparison are the app's clock, in UTC: the hosts' clocks
    must agree to well within ``seconds`` (NTP does).
    """

    def __init__(
        self, engine: Engine, model: type[SubmissionMixin], digest: str, step: str, seconds: float
    ) -> None:
        self.engine, self.model, self.digest, self.step = engine, model, digest, step
        self.seconds = seconds
        self.owner = uuid.uuid4().hex
        #: Whether this holder has it (and so must end it).
        self.held = False

    def take(self, wait: float) -> bool:
        """Take the lease of a row whose step is still to do, trying again (5 ms, doubling
        to 100 ms) while another holder has it: False when one kept it past ``wait``.
        True too, not held, when the step is no longer to do (or the row is gone): there
        is nobody to wait for."""
        model: Any = self.model
        deadline, delay = time.monotonic() + wait, 0.005
        while True:
            now = _utc_now()
            free = or_(
                model.submission_step_lease_until.is_(None),
                model.submission_step_lease_until < now,
            )
            try:
                with self.engine.begin() as conn:
                    taken = conn.execute(
                        update(model)
                        .where(self._row, model.submission_step == self.step, free)
                        .values(self._until(now) | {"submission_step_lease_owner": self.owner})
                    ).rowcount
                    step = (
                        None
                        if taken
                        else conn.scalar(select(model.submission_step).where(self._row))
                    )
            except OperationalError as error:
                # InnoDB's deadlock (1213): the holder is recording the step on this row.
                if getattr(error.orig, "args", (None,))[0] != 1213:
                    raise
                taken, step = 0, self.step
            if taken:
                self.held = True
                return True
            if step != self.step:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.1)

    def renew(self) -> bool:
        """Make it last ``seconds`` from now: False when it is no longer this holder's."""
        return self._update(self._until(_utc_now()))

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Renew the lease every third of its length while the block runs (a step that
        can be long), in a thread of its own; a lease lost meanwhile is logged."""
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.seconds / 3):
                try:
                    if not self.renew():
                        log.warning(
                            "lease of the step of %s lost to another holder", self.digest[:12]
                        )
                        return
                except SQLAlchemyError as error:
                    # It may still be renewed in time: try again at the next third.
                    log.warning(
                        "lease of the step of %s not renewed: %s", self.digest[:12], cause_of(error)
                    )

        renewing = threading.Thread(target=renew, name="flask-submit-once lease", daemon=True)
        renewing.start()
        try:
            yield
        finally:
            done.set()
            # A renewal in flight after the lease ended matches no row (its owner is gone).
            renewing.join(self.seconds)

    def commit_with(self, db: Session) -> None:
        """COMMIT ``db``'s transaction, ending the lease in it: what the step wrote is
        recorded by the lease's holder alone (:class:`LeaseLost` otherwise, nothing
        committed)."""
        # The lease first, the step's writes at the COMMIT: the row is locked in the order a
        # waiter's UPDATE of the lease locks it (the UNIQUE digest, then the row), so that
        # InnoDB finds no deadlock between them to end by rolling back either.
        with db.no_autoflush:
            ended = db.execute(
                update(self.model).where(self._row, self._mine).values(self._ended),
                execution_options={"synchronize_session": False},
            )
        if getattr(ended, "rowcount", 0) != 1:
            raise LeaseLost()
        db.commit()
        self.held = False

    def release(self) -> None:
        """End the lease, if held, so that the next holder need not wait for it to run
        out (which it does if the database cannot be told now)."""
        if self.held:
            self.held = False
            with suppress(SQLAlchemyError):
                self._update(self._ended)

    @property
    def _row(self) -> Any:
        return self.model.submission_digest == self.digest

    @property
    def _mine(self) -> Any:
        return self.model.submission_step_lease_owner == self.owner

    @property
    def _ended(self) -> dict[str, Any]:
        return {"submission_step_lease_owner": None, "submission_step_lease_until": None}

    def _until(self, now: datetime) -> dict[str, Any]:
        return {"submission_step_lease_until": now + timedelta(seconds=self.seconds)}

    def _update(self, values: dict[str, Any]) -> bool:
        with self.engine.begin() as conn:
            result = conn.execute(update(self.model).where(self._row, self._mine).values(values))
            return bool(result.rowcount == 1)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Step:
    """The step of one form: its name (what ``submission_step`` says while it is to do),
    the function, and the model whose rows it is done for."""

    def __init__(self, name: str, then: Then, model: type[SubmissionMixin]) -> None:
        self.name, self.then, self.model = name, then, model

    def pending(self, row: object) -> bool:
        return getattr(row, "submission_step", None) == self.name

    def still_to_do(self, row: object) -> bool | None:
        """Whether ``row`` still has this step to do; None when its ``submission_step``
        cannot be read again (the database went away since the transaction that found the
        row)."""
        try:
            return self.pending(row)
        except SQLAlchemyError:
            return None

    def resume(
        self,
        bind: Engine | Connection,
        identity: Any,
        digest: str,
        *,
        wait: float,
        lease: float,
        url_of: Callable[[Any], str | None] = lambda _: None,
    ) -> Outcome:
        """Do the step for the row of ``identity`` (its primary key) and ``digest`` if it
        is still to do, holding the row's :class:`Lease` (``lease`` seconds, renewed):
        created (done now), duplicate (done by the holder before), refused, unconfirmed
        (left to do), or still_running (another holder past ``wait``)."""
        engine = bind if isinstance(bind, Engine) else bind.engine
        held = Lease(engine, self.model, digest, self.name, lease)
        try:
            if not held.take(wait):
                return Outcome("still_running", waited=True)
            with Session(bind=engine, expire_on_commit=False) as db:
                return self._do(db, identity, digest, url_of, held)
        except UNREACHABLE as error:
            # Before the step began: it is still to do.
            return Outcome("unconfirmed", error=error)
        finally:
            held.release()

    def _do(
        self,
        db: Session,
        identity: Any,
        digest: str,
        url_of: Callable[[Any], str | None],
        held: Lease,
    ) -> Outcome:
        row = db.get(self.model, identity, populate_existing=True)
        # No transaction is open while it calls elsewhere.
        db.commit()
        if row is None:
            return Outcome("failed", error=LookupError("the row is gone"))
        if not self.pending(row):
            return step_outcome(row, url_of)
        # Read now: after a failed COMMIT the row cannot be loaded.
        url = url_of(row)
        try:
            try:
                with held.kept():
                    self.then(db, row, step_key(digest, self.name))
            except Refused as refused:
                # Committed with what it wrote: its record of the refusal.
                row.submission_step = REFUSED
                held.commit_with(db)
                return Outcome("refused", row, error=refused, url=url_of(row))
            row.submission_step = None
            # The COMMIT may fail too (the connection lost): then the step is still to do.
            held.commit_with(db)
        except Exception as error:
            # Not done, or not recorded: the next holder tries again.
            with suppress(SQLAlchemyError):
                db.rollback()
            return Outcome("unconfirmed", row, error=error, url=url)
        return Outcome("created", row, url=url_of(row))

    def to_do(self, db: Session) -> list[tuple[Any, str]]:
        """(identity, digest) of the rows whose step is still to do."""
        model: Any = self.model
        rows = db.scalars(select(model).where(model.submission_step == self.name))
        return [(inspect(row).identity, row.submission_digest) for row in rows]


def step_outcome(row: Any, url_of: Callable[[Any], str | None], waited: bool = False) -> Outcome:
    """What a row whose step is no longer to do answers: done, or refused (``waited``: the
    repeat waited for the submit that made it)."""
    if getattr(row, "submission_step", None) == REFUSED:
        return Outcome("refused", row, waited, error=Refused(), url=url_of(row))
    return Outcome("duplicate", row, waited, url=url_of(row))


def resume_all(
    steps: Iterable[tuple[Step, Sessions | None]], *, wait: float, lease: float
) -> dict[str, int]:
    """Each step's rows left to do, done where no request holds their lease; how many
    ended in each outcome kind (a step left to do again is logged, at WARNING)."""
    counts: dict[str, int] = {}
    for step, sessions in steps:
        db = new_session(sessions)
        try:
            refuse_steps_on(db.get_bind(step.model))
            rows = step.to_do(db)
            bind = db.get_bind()
            db.rollback()
            for identity, digest in rows:
                outcome = step.resume(bind, identity, digest, wait=wait, lease=lease)
                if outcome.error is not None and outcome.kind == "unconfirmed":
                    log.warning(
                        "step %s of %s left to do: %s",
                        step.name,
                        digest[:12],
                        cause_of(outcome.error),
                    )
                counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
        finally:
            db.close()
    return counts
