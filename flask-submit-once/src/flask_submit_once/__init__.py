"""Flask forms that take effect once and only once.

Every rendered form carries a single-use token kept in Redis with a TTL; a submit consumes
it with one ``GETDEL`` and runs its transaction once in PostgreSQL; a UNIQUE column on the
token's digest is the last line when Redis loses a delete::

    from flask_submit_once import SubmitOnce, SubmissionMixin

Everything a user of the library needs is one of the names below; the rest is private.
"""

from . import signals
from ._answers import Outcome
from ._errors import BadFormToken, CrossSite, Refused, SubmitOnceError, TooManyForms, Unavailable
from ._extension import SubmitOnce
from ._model import SubmissionMixin
from ._tokens import TokenStore

__version__ = "0.10.0"

__all__ = [
    "BadFormToken",
    "CrossSite",
    "Outcome",
    "Refused",
    "SubmissionMixin",
    "SubmitOnce",
    "SubmitOnceError",
    "TokenStore",
    "TooManyForms",
    "Unavailable",
    "__version__",
    "signals",
]
