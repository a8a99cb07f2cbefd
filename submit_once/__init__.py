"""Forms submitted once and only once: single-use tokens in Redis, one
PostgreSQL transaction per token, and a UNIQUE column as the last line.

    tokens.py      TokenStore: issue (SET EX NX), consume (GETDEL), claim, release
    runner.py      submit_once / run_once: advisory lock, the one Redis step,
                   one transaction, and the outcome every duplicate gets
    extension.py   FormTokens, the Flask extension over both
    signals.py     token_issued, token_consumed, submit_committed, submit_decided
    redis_urls.py  optional: a Redis client from a Cluster or Sentinel URL

It imports nothing from the shop around it (``webapp``); see docs/PATTERN.md.
"""

from .extension import BadFormToken, FormTokens, TooManyForms, form_token_input
from .runner import (
    Created,
    Duplicate,
    Expired,
    Failed,
    Outcome,
    Refused,
    StillRunning,
    Unavailable,
    Unconfirmed,
    run_once,
    submit_once,
)
from .signals import submit_committed, submit_decided, token_consumed, token_issued
from .tokens import TokenStore, is_well_formed

__all__ = [
    "BadFormToken",
    "Created",
    "Duplicate",
    "Expired",
    "Failed",
    "FormTokens",
    "Outcome",
    "Refused",
    "StillRunning",
    "TokenStore",
    "TooManyForms",
    "Unavailable",
    "Unconfirmed",
    "form_token_input",
    "is_well_formed",
    "run_once",
    "submit_committed",
    "submit_decided",
    "submit_once",
    "token_consumed",
    "token_issued",
]
