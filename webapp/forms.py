"""The base of the shop's HTML forms: every field is read as one piece of text.

Flask-WTF hands a form whatever the request holds under a field's name: a file part
of a multipart body (a ``FileStorage``), or, from a JSON body, a number, ``true``,
``null``, a list or an object. WTForms' validators expect text (``Length`` calls
``len()``, a filter ``.strip()``), so each of those was a 500, and an object reached
the INSERT (a 503). Here a field sent as anything but one piece of text (a JSON list
too) is answered like any invalid field: a 422 beside the field, the input and the
form token kept, nothing spent. And a multipart body with a part that has no name is
refused (400) before anything reads the form (:func:`init_app`).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, request
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from werkzeug.datastructures import FileStorage, MultiDict
from werkzeug.exceptions import BadRequest

__all__ = ["NOT_TEXT", "ShopForm", "init_app"]

#: A field sent as a file, more than once, or as a JSON value that is no string or number.
NOT_TEXT = "Type this field in the form: send it once, as text."


def _as_text(value: object) -> str | None:
    """``value`` as the text a browser would have sent, or None if it is none.
    Numbers pass as written: a ``fetch()`` of JSON sends ``"quantity": 2``."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


class ShopForm(FlaskForm):
    """A FlaskForm whose fields only ever hold one piece of text (or nothing).

    :attr:`not_text` names the fields of this request that came as something else;
    :meth:`validate` gives each of them the error :data:`NOT_TEXT`.
    """

    not_text: frozenset[str] = frozenset()

    class Meta:
        def wrap_formdata(self, form: Any, formdata: Any) -> Any:
            try:
                wrapped = super().wrap_formdata(form, formdata)  # type: ignore[misc]
            # the JSON parser's stack: json.loads does not catch it
            except RecursionError:
                raise BadRequest("The body is nested too deeply to be a form.") from None
            # a JSON body that is no object: [1], "x", 5
            except (TypeError, ValueError):
                raise BadRequest("Send the form's fields, as an HTML form does.") from None
            if wrapped is None:
                form.not_text = frozenset()
                return None
            kept: MultiDict[str, str | FileStorage] = MultiDict()
            refused = set()
            for name, values in wrapped.lists():
                if _one_file_for_a_file_input(form, name, values):
                    kept[name] = values[0]
                    continue
                text = _as_text(values[0]) if len(values) == 1 else None
                if text is None:
                    refused.add(name)
                else:
                    kept[name] = text
            form.not_text = frozenset(name for name in refused if name in form)
            return kept

    def validate(self, extra_validators: Any = None) -> bool:
        valid = super().validate(extra_validators)
        # its own words, not "Enter your name."
        for name in self.not_text:
            self[name].errors = [NOT_TEXT]
        return valid and not self.not_text


def _one_file_for_a_file_input(form: Any, name: str, values: list[Any]) -> bool:
    return (
        name in form
        and isinstance(form[name], FileField)
        and len(values) == 1
        and isinstance(values[0], FileStorage)
    )


def init_app(app: Flask) -> None:
    """Call before ``csrf.init_app``: Flask-WTF's CSRF check is a before_request function
    too, run in the order they were registered, and it reads every name in the form."""
    app.before_request(refuse_nameless_parts)


def refuse_nameless_parts() -> None:
    """400 for a multipart part without a name: werkzeug files it under the key None,
    on which Flask-WTF's CSRF check, looking for its token under every name, failed
    with a 500. No browser sends one."""
    if request.mimetype == "multipart/form-data" and (
        None in request.form or None in request.files
    ):
        abort(
            400,
            "Part of this form has no name, so it could not be processed. Open the "
            "form again and submit it from there.",
        )
