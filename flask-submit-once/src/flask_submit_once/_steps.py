"""A step outside the database, once per submission: after the row, before the answer.

A form whose submit must also do something elsewhere (charge a card, book a seat at a
partner) names it: ``@submit_once.form(..., then=charge)``. The row is committed first,
marked with the step still to do (``submission_step``), so that a crash, a timeout or a
kill anywhere after it leaves a row that says what is next::

    transaction 1   lock, GETDEL, the view's row (submission_step = "charge"), COMMIT
    the step        pg_advisory_lock(k) on a connection of its own, held without a
                    transaction: re-read the row; still "charge"? then
                    then(db, row, key): the call elsewhere, with an idempotency key made
                    from the submission's digest (never from anything a client chose)
    transaction 2   what it wrote, submission_step = NULL (or "refused"), COMMIT; unlock

Whoever holds the lock does the step: the request that made the row, a repeat of it that
finds the row still marked (a double click, Back + submit, a retry), or the sweeper
(:meth:`SubmitOnce.resume <flask_submit_once.SubmitOnce.resume>`, ``flask submit-once
resume``). Its key is the same every time, so the other side answers a repeat with what
it did the first time. The lock is the runner's own key, so a repeat waits for it as it
waits for a submit in flight. ``then`` raising :class:`~flask_submit_once.Refused` (a card
declined) commits what it wrote and marks the row "refused": the user gets the form again
with their input and a fresh token. Any other exception rolls back and leaves the row
marked: the user is told it could not be confirmed, and the next holder tries again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import Any

from sqlalchemy import Connection, Engine, inspect, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ._errors import Refused
from ._model import SubmissionMixin
from ._outcome import Outcome
from ._runner import UNREACHABLE, lock_key
from ._sessions import Sessions, new_session

__all__ = ["REFUSED", "Step", "resume_all", "settled", "step_key"]

log = logging.getLogger("flask_submit_once")
#: What submission_step holds once the step refused the submission.
REFUSED = "refused"

Then = Callable[[Session, Any, str], None]


def step_key(digest: str, name: str) -> str:
    """The idempotency key the step sends elsewhere: 43 characters made from the
    submission's digest and the step's name."""
    material = f"flask-submit-once step\x00{name}\x00{digest}".encode()
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:43]


class Step:
    """The step of one form: its name (what ``submission_step`` says while it is to do),
    the function, and the model whose rows it is done for."""

    def __init__(self, name: str, then: Then, model: type[SubmissionMixin]) -> None:
        self.name, self.then, self.model = name, then, model

    def pending(self, row: object) -> bool:
        return getattr(row, "submission_step", None) == self.name

    def still_to_do(self, row: object) -> bool | None:
        """Whether ``row`` still has this step to do; None when its mark cannot be read
        again (the database went away since the transaction that found the row)."""
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
        url_of: Callable[[Any], str | None] = lambda _: None,
    ) -> Outcome:
        """Do the step for the row of ``identity`` (its primary key) and ``digest`` if it
        is still to do, holding its lock on a connection of its own from ``bind``'s
        engine: created (done now), duplicate (done by whoever held the lock before),
        refused, unconfirmed (left to do), or still_running (another holder past
        ``wait``)."""
        engine = bind if isinstance(bind, Engine) else bind.engine
        key = lock_key(digest)
        try:
            conn = _locked(engine, key, wait)
            if conn is None:
                return Outcome("still_running", waited=True)
            with conn:
                try:
                    with Session(bind=conn, expire_on_commit=False) as db:
                        return self._do(db, identity, digest, url_of)
                finally:
                    _unlock(conn, key)
        except UNREACHABLE as error:  # before the step began: it is still to do
            log.warning("step %s of %s not begun: %s", self.name, digest[:12], type(error).__name__)
            return Outcome("unconfirmed", error=error)

    def _do(
        self, db: Session, identity: Any, digest: str, url_of: Callable[[Any], str | None]
    ) -> Outcome:
        row = db.get(self.model, identity, populate_existing=True)
        db.commit()  # no transaction while it calls elsewhere
        if row is None:
            return Outcome("failed", error=LookupError("the row is gone"))
        if not self.pending(row):
            return settled(row, url_of)
        url = url_of(row)  # read now: after a failed commit the row cannot be loaded
        try:
            try:
                self.then(db, row, step_key(digest, self.name))
            except Refused as refused:
                row.submission_step = REFUSED  # with what it wrote: its record of the refusal
                db.commit()
                return Outcome("refused", row, error=refused, url=url_of(row))
            row.submission_step = None
            db.commit()  # may fail too (the connection lost): then still to do
        except Exception as error:  # not done, or not recorded: the next holder tries again
            with suppress(SQLAlchemyError):
                db.rollback()
            log.warning("step %s of %s not done: %s", self.name, digest[:12], type(error).__name__)
            return Outcome("unconfirmed", row, error=error, url=url)
        return Outcome("created", row, url=url_of(row))

    def to_do(self, db: Session) -> list[tuple[Any, str]]:
        """(identity, digest) of the rows whose step is still to do."""
        model: Any = self.model
        rows = db.scalars(select(model).where(model.submission_step == self.name))
        return [(inspect(row).identity, row.submission_digest) for row in rows]


def settled(row: Any, url_of: Callable[[Any], str | None], waited: bool = False) -> Outcome:
    """What a row whose step is no longer to do answers: done, or refused (``waited``: the
    repeat waited for the submit that made it)."""
    if getattr(row, "submission_step", None) == REFUSED:
        return Outcome("refused", row, waited, error=Refused(), url=url_of(row))
    return Outcome("duplicate", row, waited, url=url_of(row))


def _locked(engine: Engine, key: int, wait: float) -> Connection | None:
    """A connection of its own holding the lock ``key`` (the session's: it outlives the
    transaction), or None when another holder kept it past ``wait``. A waiter holds no
    connection between tries, as a submit waiting for its lock holds none: a repeat
    waiting for a step must not take the pool's connections from the step."""
    deadline, delay = time.monotonic() + wait, 0.005
    while True:
        conn = engine.connect()
        try:
            got = bool(
                conn.exec_driver_sql("SELECT pg_try_advisory_lock(%(k)s)", {"k": key}).scalar()
            )
            conn.commit()
        except BaseException:
            conn.invalidate()  # it may hold the lock: never back in the pool
            conn.close()
            raise
        if got:
            return conn
        conn.close()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.1)


def _unlock(conn: Any, key: int) -> None:
    """Release the lock; a connection that cannot is thrown away, never pooled holding
    it (its server session ends, and the lock with it)."""
    try:
        conn.rollback()
        conn.exec_driver_sql("SELECT pg_advisory_unlock(%(k)s)", {"k": key})
        conn.commit()
    except SQLAlchemyError:
        conn.invalidate()


def resume_all(steps: Iterable[tuple[Step, Sessions | None]], *, wait: float) -> dict[str, int]:
    """Each step's rows left to do, done where no request holds their lock; how many
    ended in each outcome kind."""
    counts: dict[str, int] = {}
    for step, sessions in steps:
        db = new_session(sessions)
        try:
            rows = step.to_do(db)
            bind = db.get_bind()
            db.rollback()
            for identity, digest in rows:
                kind = step.resume(bind, identity, digest, wait=wait).kind
                counts[kind] = counts.get(kind, 0) + 1
        finally:
            db.close()
    return counts
