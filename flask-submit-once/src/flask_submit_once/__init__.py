"""Flask forms that take effect once and only once.

Every rendered form carries a single-use token kept in Redis with a TTL; a submit consumes
it with one ``GETDEL`` and runs its transaction once in PostgreSQL or SQLite; a UNIQUE
column on the token's digest is the last line when Redis loses a delete::

    from flask_submit_once import SubmitOnce, SubmissionMixin, VersionedMixin

Everything a user of the library needs is one of the names below; the rest is private.
"""

from __future__ import annotations

from . import signals
from ._answers import Outcome
from ._errors import (
    CrossSiteError,
    FormTokenError,
    NotUnicodeError,
    Refused,
    SubmitOnceError,
    TooManyFormsError,
    UnavailableError,
    UnsupportedDatabaseError,
)
from ._extension import SubmitOnce
from ._model import SubmissionMixin, VersionedMixin
from ._tokens import TokenStore

__version__ = "1.0.0"

__all__ = [
    "CrossSiteError",
    "FormTokenError",
    "NotUnicodeError",
    "Outcome",
    "Refused",
    "SubmissionMixin",
    "SubmitOnce",
    "SubmitOnceError",
    "TokenStore",
    "TooManyFormsError",
    "UnavailableError",
    "UnsupportedDatabaseError",
    "VersionedMixin",
    "__version__",
    "signals",
]

#: Names of 0.10 that 1.0 renamed: importing one says what it is called now.
_RENAMED = {
    "BadFormToken": "FormTokenError",
    "CrossSite": "CrossSiteError",
    "TooManyForms": "TooManyFormsError",
    "Unavailable": "UnavailableError",
    "NotUnicode": "NotUnicodeError",
}


def __getattr__(name: str) -> object:
    if name in _RENAMED:
        raise ImportError(f"{name} was renamed {_RENAMED[name]} in Flask-Submit-Once 1.0")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
