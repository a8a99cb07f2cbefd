"""The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header).

What this module decides, framework-free:

* the key's shape (:data:`KEY_PATTERN`, published as is in the OpenAPI
  document): 1-255 printable ASCII characters, sent either as a
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

__all__ = ["KEY_PATTERN", "MAX_KEY_LENGTH", "expires_at", "http_date", "parse_key"]

MAX_KEY_LENGTH = 255
#: The header's whole shape, in the regex dialect Python and JSON Schema share: the code
#: checks a key with the very pattern the OpenAPI document publishes, so neither admits
#: what the other refuses. Optional blanks around it (HTTP's OWS); then either
#:
#: * bare: 1-255 printable ASCII characters, no comma (two Idempotency-Key headers
#:   arrive joined by ", "), neither starting with a quote nor ending with a blank;
#: * quoted, as a structured-field string: 1-255 characters, ``\"`` and ``\\`` escaped,
#:   not all blanks.
KEY_PATTERN = (
    r"^[ \t]*(?:([!#-+\--~](?:[ -+\--~]{0,253}[!-+\--~])?)"
    r'|"((?! *")(?:[ !#-\[\]-~]|\\["\\]){1,255})")[ \t]*$'
)
_KEY = re.compile(KEY_PATTERN)


def parse_key(header: str) -> str | None:
    """The key in an ``Idempotency-Key`` header value, or None if malformed."""
    match = _KEY.fullmatch(header)
    if match is None:
        return None
    bare, quoted = match.groups()
    return bare if bare is not None else re.sub(r'\\(["\\])', r"\1", quoted)


def expires_at(created: datetime, retention_seconds: int) -> datetime:
    """When a result stops being replayed."""
    return created + timedelta(seconds=retention_seconds)


def http_date(moment: datetime) -> str:
    """An IMF-fixdate, as HTTP headers carry dates."""
    return format_datetime(moment.astimezone(UTC), usegmt=True)
