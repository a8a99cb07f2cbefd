"""What a submit sent, and what it is: the fingerprints that tell a repeat of the same
submission from one with other input."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from flask import request

from ._requests import json_body

__all__ = ["Fields", "csrf_field", "sent_fingerprint", "submission_values"]

#: What makes a submission what it is: some of the form's fields, or a mapping made from it.
Fields: TypeAlias = Sequence[str] | Callable[[Any], Mapping[str, object]]
#: WTForms fields that are no part of what was asked for.
_NOT_DATA = ("CSRFTokenField", "SubmitField")


def submission_values(form: Any, fields: Fields | None) -> Mapping[str, object]:
    """What the submission is: the form's data after its filters and coercion (what would
    be stored), of ``fields`` (default: all but CSRF and buttons), or what ``fields(form)``
    says it is."""
    if callable(fields):
        return fields(form)
    try:
        data = {field.name: field.data for field in form if field.type not in _NOT_DATA}
    except TypeError:  # not a WTForms form: its data
        data = dict(form.data)
    return {k: v for k, v in data.items() if fields is None or k in fields}


def sent_fingerprint(token_field: str) -> str:
    """A digest of what was sent, as sent: how a repeat of the same bytes (a double click,
    a retry) is known before validation. Only ever compared with another of its own kind
    in this process, so it is taken as sent, without the stored fingerprint's normalising
    (a repeat that differs only in it goes the long way, to the same answer)."""
    body = json_body()
    sent: Mapping[str, Any] = body if body is not None else request.form.to_dict(flat=False)
    material = json.dumps(
        {k: v for k, v in sent.items() if k != token_field},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(material.encode()).hexdigest()


def csrf_field(form: Any) -> str:
    """The name of a Flask-WTF form's CSRF field."""
    meta = getattr(form, "meta", None)
    return str(getattr(meta, "csrf_field_name", "csrf_token"))
