"""The fingerprint of a submission: what makes it what it is, so that a repeat with other
input is told apart from a repeat of the same."""

from __future__ import annotations

import base64
import hashlib
import json
import unicodedata
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal

__all__ = ["fingerprint"]


def fingerprint(values: Mapping[str, object]) -> str:
    """A 43-character digest of the values that make a submission what it is.

    Taken over what would be *stored* (a validated form's data, after its filters and
    coercion), not the raw strings, so the same submission sent as ``" José "``, in NFD,
    or with a quantity of ``01`` is the same submission when the form stores it the same.
    Strings are NFC-normalised with line endings as ``\\n`` (browsers send CRLF in a
    textarea); a list of one value is that value (a form field and the same JSON member
    agree); numbers compare by value (``1``, ``1.0`` and ``Decimal("1.00")``); the order
    of the names does not matter.
    """
    canonical = json.dumps(
        {name: _canonical(value) for name, value in values.items()},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    # surrogatepass: a JSON body may carry a lone surrogate ("\ud800"), which UTF-8 cannot.
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()
    return base64.urlsafe_b64encode(digest).decode()[:43]


def _canonical(value: object) -> object:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | Decimal):
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        return format(number.normalize(), "f") if number.is_finite() else str(number)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return _canonical(value[0]) if len(value) == 1 else [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    return str(value)
