"""Flask forms that take effect once and only once.

Every rendered form carries a single-use token kept in Redis with a TTL; a submit
spends it with one ``GETDEL`` and runs its transaction once in PostgreSQL; a UNIQUE
column on the token's digest is the last line when Redis loses a delete. Everything
a user of the library needs is importable from here::

    from submit_once import FormTokens, Created, Duplicate, Expired

The narrative documentation is in the library's ``docs/``; the modules are
``tokens`` (the Redis part, framework-free), ``runner`` (the transaction and the
outcomes, framework-free), ``extension`` (Flask), ``signals`` and ``redis_urls``.
"""

from .extension import (
    TOKEN_HEADER,
    BadFormToken,
    FormTokens,
    FormTokensState,
    NotANavigation,
    TooManyForms,
    TooManyFormsFromClient,
    form_token_input,
)
from .forms import MESSAGES, OnceForm, Rendering, RequestKind, request_kind
from .history import SHOW_AGAIN_ON_BACK, BackFriendlySessionInterface
from .runner import (
    Changed,
    Created,
    Duplicate,
    Expired,
    Failed,
    HasScopedSession,
    Outcome,
    Refused,
    Sessions,
    StillRunning,
    Unavailable,
    Unconfirmed,
    fingerprint,
    lock_key,
    restore,
    run_once,
    submit_once,
)
from .signals import submit_committed, submit_decided, token_consumed, token_issued
from .tokens import (
    TOKEN_BYTES,
    IssueLimit,
    RedisClient,
    TokenStore,
    TooManyIssued,
    is_well_formed,
)

__version__ = "0.9.0"

__all__ = [
    "MESSAGES",
    "SHOW_AGAIN_ON_BACK",
    "TOKEN_BYTES",
    "TOKEN_HEADER",
    "BackFriendlySessionInterface",
    "BadFormToken",
    "Changed",
    "Created",
    "Duplicate",
    "Expired",
    "Failed",
    "FormTokens",
    "FormTokensState",
    "HasScopedSession",
    "IssueLimit",
    "NotANavigation",
    "OnceForm",
    "Outcome",
    "RedisClient",
    "Refused",
    "Rendering",
    "RequestKind",
    "Sessions",
    "StillRunning",
    "TokenStore",
    "TooManyForms",
    "TooManyFormsFromClient",
    "TooManyIssued",
    "Unavailable",
    "Unconfirmed",
    "__version__",
    "fingerprint",
    "form_token_input",
    "is_well_formed",
    "lock_key",
    "request_kind",
    "restore",
    "run_once",
    "submit_committed",
    "submit_decided",
    "submit_once",
    "token_consumed",
    "token_issued",
]
