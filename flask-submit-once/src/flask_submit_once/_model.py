"""The model mixin: the two columns the pattern needs, and the lookup by digest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import String, event, inspect, select
from sqlalchemy.orm import Mapped, Session, declared_attr, mapped_column

__all__ = ["DIGEST_LENGTH", "SubmissionMixin", "stamped"]

T = TypeVar("T")
_STAMP = "flask_submit_once.stamp"

#: A token digest: SHA-256, URL-safe base64 without padding.
DIGEST_LENGTH = 43


class SubmissionMixin:
    """Columns for a model whose rows a protected form creates, one per submission::

        class Signup(SubmissionMixin, db.Model):       # or (SubmissionMixin, Base)
            id: Mapped[int] = mapped_column(primary_key=True)
            email: Mapped[str]

    It adds ``submission_digest``, the digest of the token that created the row, in a
    UNIQUE column (the last line of defence when Redis gives a spent token back);
    ``submission_fingerprint``, what the submission was (so that a repeat with other
    input is told apart); and ``submission_step``, the step outside the database still
    to do for it, if its form has one (``then=``), else NULL (a view sets it to None
    itself for a row that needs no step). The protected view fills them: it only returns
    the row. In a migration they are ``VARCHAR(43) NOT NULL
    UNIQUE``, ``VARCHAR(43)`` and ``VARCHAR(64)``.
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

    @classmethod
    def find_submission(cls, db: Session, digest: str) -> Any:
        """The row the submission with this digest created, or None."""
        return db.scalar(select(cls).where(cls.submission_digest == digest))


def stamped(
    db: Session,
    digest: str,
    fingerprint: str | None,
    view: Callable[[], T],
    step: str | None = None,
) -> T:
    """Run a protected view in ``db``, its new :class:`SubmissionMixin` rows stamped with the
    submission's digest and fingerprint when they are flushed (the view may flush), and
    the row it returns added, marked with the ``step`` still to do, and flushed: its
    defaults and keys are there to be read."""
    db.info[_STAMP] = (digest, fingerprint)
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
        db.info.pop(_STAMP, None)
    return result


@event.listens_for(Session, "before_flush")
def _stamp(db: Session, *_: Any) -> None:
    stamp = db.info.get(_STAMP)
    if stamp is None:
        return
    for row in db.new:
        if isinstance(row, SubmissionMixin) and not row.submission_digest:
            row.submission_digest, row.submission_fingerprint = stamp
