"""The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header).

What this module decides, framework-free:

* the key's shape: 1-255 printable ASCII characters, sent either as a
  structured-field string (``"abc"``, the draft's form) or bare (``abc``,
  without commas, which would be ambiguous with a repeated header);
* the request fingerprint: SHA-256 over method, path and the body as
  canonical JSON (sorted keys, no spaces), so a retry that re-serialises the
  same object differently still matches, and a different payload does not;
* how long a result is replayed, and the ``Idempotency-Key-Expires`` value
  that tells the client.

The once-only part is :func:`submit_once.runner.run_once` with
``TokenStore.claim`` (one ``SET NX EX``) as its single-use mark.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

__all__ = ["MAX_KEY_LENGTH", "expires_at", "fingerprint", "http_date", "parse_key"]

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


def fingerprint(method: str, path: str, body: object) -> str:
    """SHA-256 (hex) of the request as far as idempotency is concerned."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()


def expires_at(created: datetime, retention_seconds: int) -> datetime:
    """When a result stops being replayed."""
    return created + timedelta(seconds=retention_seconds)


def http_date(moment: datetime) -> str:
    """An IMF-fixdate, as HTTP headers carry dates."""
    return format_datetime(moment.astimezone(UTC), usegmt=True)
