"""The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header).

What this module decides, framework-free:

* the key's shape: 1-255 printable ASCII characters, sent either as a
  structured-field string (``"abc"``, the draft's form) or bare (``abc``,
  without commas, which would be ambiguous with a repeated header);
* how long a result is replayed, and the ``Idempotency-Key-Expires`` value
  that tells the client.

The once-only part, and what a request is (method, path and body compared as data),
are Flask-Submit-Once's ``submit_once.idempotent`` (webapp/api/orders.py).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

__all__ = ["MAX_KEY_LENGTH", "expires_at", "http_date", "parse_key"]

MAX_KEY_LENGTH = 255
# No comma in the bare form: two Idempotency-Key headers arrive joined by ", ".
_BARE = re.compile(r"[\x21-\x2b\x2d-\x7e][\x20-\x2b\x2d-\x7e]*")
_QUOTED = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


def parse_key(header: str) -> str | None:
    """The key in an ``Idempotency-Key`` header value, or None if malformed."""
    value = header.strip()
    quoted = _QUOTED.fullmatch(value)
    if quoted:
        value = re.sub(r'\\(["\\])', r"\1", quoted.group(1))
    elif not _BARE.fullmatch(value) or value.startswith('"'):
        return None
    return value if 1 <= len(value) <= MAX_KEY_LENGTH and value.strip() else None


def expires_at(created: datetime, retention_seconds: int) -> datetime:
    """When a result stops being replayed."""
    return created + timedelta(seconds=retention_seconds)


def http_date(moment: datetime) -> str:
    """An IMF-fixdate, as HTTP headers carry dates."""
    return format_datetime(moment.astimezone(UTC), usegmt=True)
