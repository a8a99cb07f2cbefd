"""The framework-free runner (submit_once.submit_once) on a real Redis and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select

from submit_once import Created, Duplicate, TokenStore, submit_once
from tests_support import Signup

SID = "session-a"


def test_an_orm_object_returned_by_create_can_be_read_after_the_commit(rdb, sessions):
    """A plain sessionmaker expires objects at COMMIT; the runner's own sessions do not,
    so the row create returns (and find's) can be read after the submit: no
    DetachedInstanceError after the row was committed."""
    store = TokenStore(rdb, ttl=60, prefix="test")
    token = store.issue(session_id=SID, form="signup")

    def add(db, digest):
        row = Signup(email="ada@example.com", token_digest=digest)
        db.add(row)
        db.flush()
        return row

    def find(db, digest):
        return db.scalar(select(Signup).where(Signup.token_digest == digest))

    def submit():
        return submit_once(tokens=store, token=token, session_id=SID, form="signup",
                           sessions=sessions, create=add, find=find)

    first, again = submit(), submit()
    assert isinstance(first, Created) and isinstance(again, Duplicate)
    assert (first.result.id, first.result.email) == (again.result.id, "ada@example.com")
