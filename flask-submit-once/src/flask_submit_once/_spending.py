"""How a submitted token is spent, and what became of a submit, asked without spending."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from flask import Response, make_response
from sqlalchemy.orm import Session

from ._errors import BadFormToken
from ._issuing import session_id
from ._requests import submitted_token
from ._runner import Landing, lock_key
from ._signed import SignedExpired, is_signed
from ._state import State

__all__ = ["CHECK_HEADER", "Spending", "status_of"]

#: A script asking what became of a submit it could not see answered, without spending
#: anything: the same POST with this header set to 1.
CHECK_HEADER = "X-Submit-Once-Check"


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
            return Spending(
                digest,
                lambda: store.consume_digest(digest),
                lambda: store.claim(digest),
                st.redis_down_fallback,
            )
        if st.signed is None:
            raise BadFormToken()
        digest = store.digest(
            st.signed.nonce(token, session_id=sid, form=name), session_id=sid, form=name
        )
        return Spending(digest, lambda: store.claim(digest), lambda: store.release(digest), True)


def status_of(
    st: State, name: str, db: Session, find: Callable[[Session, str], Landing | None]
) -> Response:
    """``done`` (and where), ``running``, or ``not_done`` (nothing was made: submitting it
    is safe) for the token this request carries, with nothing spent."""
    try:
        digest = Spending.of(st, submitted_token(st.field), name).digest
    except SignedExpired:
        return make_response({"status": "not_done", "location": None})
    try:
        free = (
            db.connection()
            .exec_driver_sql("SELECT pg_try_advisory_xact_lock(%(key)s)", {"key": lock_key(digest)})
            .scalar()
        )
        found = find(db, digest) if free else None
    finally:
        db.rollback()
    status = "done" if found else "not_done" if free else "running"
    return make_response({"status": status, "location": found.url if found else None})
