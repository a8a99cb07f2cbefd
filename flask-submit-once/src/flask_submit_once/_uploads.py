"""Uploads kept while a form is shown again, so the user does not pick the file again.

A submit that sent files and did not take effect (another field invalid: 422; or any
answer that draws the form again) keeps each file in Redis, for as long as a form token
lives, under a random id. The form drawn again carries a signed reference to it beside
its token (:meth:`TemplateHelper.input <flask_submit_once._answers.TemplateHelper.input>`
renders both); sent back with that file input left empty, the reference puts the kept
file back into ``request.files`` before the form is validated, as if it had been picked
again. A file picked again replaces the kept one.

The reference is signed with the app's secret key and bound to the browser session and
the form, and expires with the TTL; the bytes are never served, only put back into that
session's next submit of that form. It also says what the file was (its name and SHA-256):
a repeat of a submit that took effect with it, arriving after its copy was deleted, is
still the same input (answered with the result, not told it differs). A submit that takes
effect deletes what it used;
each session keeps at most ``SUBMIT_ONCE_MAX_KEPT_UPLOADS_PER_SESSION`` files (the oldest
go first), each at most ``SUBMIT_ONCE_MAX_KEPT_UPLOAD_BYTES`` (a larger one is not kept:
the user picks it again).
"""

from __future__ import annotations

import base64
import io
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from flask import request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from markupsafe import Markup
from redis.exceptions import RedisError
from werkzeug.datastructures import FileStorage, ImmutableMultiDict, MultiDict

from ._issuing import binding, existing_session_id

if TYPE_CHECKING:
    from ._extension import State

__all__ = ["discard_used", "gone_files", "keep_sent", "kept_inputs", "kept_name", "put_back"]

_SALT = "flask-submit-once kept upload"
#: Where a request notes the files it kept, by form name: (field, file name, reference).
_KEPT = "flask_submit_once.kept_uploads"
#: The kept files a request put back: their ids (deleted once its submit takes effect),
#: and each put-back upload's Kept (drawn again as it was, not kept twice).
_USED = "flask_submit_once.used_uploads"
_PUT_BACK = "flask_submit_once.put_back_uploads"
#: The kept files a request referred to whose copy is gone: by field, (file name, SHA-256).
_GONE = "flask_submit_once.gone_uploads"


class Kept(NamedTuple):
    field: str
    filename: str
    reference: str


def input_name(state: State) -> str:
    """The hidden input a reference travels in: the token's field name + ``_kept``."""
    return f"{state.field}_kept"


def keep_sent(state: State, form: str, digest_of: Callable[[FileStorage], str]) -> None:
    """Keep the files this request sent for ``form`` (not yet kept), for the page that
    draws the form again; ``digest_of``: a file's SHA-256 (the fingerprint's, read once a
    request). Redis away: nothing kept, the user picks them again."""
    sid = existing_session_id()
    if sid is None or not state.setting("KEEP_UPLOADS"):
        return
    limit = int(state.setting("MAX_KEPT_UPLOAD_BYTES"))
    put_back: dict[int, Kept] = request.environ.get(_PUT_BACK, {})
    kept: list[Kept] = []
    for field, uploads in request.files.lists():
        for upload in uploads:
            if id(upload) in put_back:
                kept.append(put_back[id(upload)])
                continue
            if not upload.filename:
                continue
            upload.stream.seek(0)
            data = upload.stream.read(limit + 1)
            upload.stream.seek(0)
            if len(data) > limit:
                continue
            try:
                kept.append(_store(state, sid, form, field, upload, data, digest_of(upload)))
            except RedisError:
                return
    if kept:
        request.environ.setdefault(_KEPT, {})[form] = kept


def _store(
    state: State, sid: str, form: str, field: str, upload: FileStorage, data: bytes, sha: str
) -> Kept:
    """One file in Redis, the session's oldest past its allowance deleted; its reference."""
    store, ttl = state.store, state.store.ttl
    ident = secrets.token_urlsafe(16)
    listed = store.key(f"kept:{_hashed(sid)}")
    allowance = max(1, int(state.setting("MAX_KEPT_UPLOADS_PER_SESSION")))
    with store.client.pipeline(transaction=False) as pipe:
        pipe.set(store.key(f"upload:{ident}"), base64.b64encode(data).decode(), ex=ttl)
        pipe.lpush(listed, ident)
        pipe.lrange(listed, allowance, -1)
        pipe.ltrim(listed, 0, allowance - 1)
        pipe.expire(listed, ttl)
        evicted = pipe.execute()[2]
    if evicted:
        store.client.delete(*(store.key(f"upload:{old}") for old in evicted))
    filename = upload.filename or ""
    reference = _serializer(state).dumps(
        [ident, field, filename, upload.content_type or "", binding(sid, form), sha]
    )
    return Kept(field, filename, reference)


def put_back(state: State, form: str) -> None:
    """Put the kept files this submit refers to back into ``request.files``, for each
    file input the user left empty. A reference that is not good here (another session
    or form, expired, tampered with), or whose file is gone, puts nothing back; a good
    one whose file is gone is noted (:func:`gone_files`)."""
    references = request.form.getlist(input_name(state))
    sid = existing_session_id()
    if not references or sid is None:
        return
    picked = {field for field, upload in request.files.items(multi=True) if upload.filename}
    files = MultiDict(request.files.items(multi=True))
    used: list[str] = []
    again: dict[int, Kept] = {}
    gone: dict[str, list[tuple[str, str]]] = {}
    serializer = _serializer(state)
    for reference in references:
        try:
            ident, field, filename, content_type, bound, sha = serializer.loads(
                reference, max_age=state.store.ttl
            )
        except (BadSignature, ValueError, TypeError):
            continue
        if bound != binding(sid, form) or field in picked or not isinstance(ident, str):
            continue
        try:
            encoded = state.store.client.get(state.store.key(f"upload:{ident}"))
        except RedisError:
            return
        if not files.get(field):
            # The empty part a file input sends when nothing is picked. Out of
            # request.files, the request's end would not close it (a temporary file).
            for empty in files.poplist(field):
                empty.close()
        if encoded is None:
            gone.setdefault(field, []).append((filename, sha))
            continue
        upload = FileStorage(
            io.BytesIO(base64.b64decode(encoded)),
            filename=filename,
            name=field,
            content_type=content_type or None,
        )
        files.add(field, upload)
        used.append(ident)
        again[id(upload)] = Kept(field, filename, reference)
    if used or gone:
        # Werkzeug's Request.files is a cached property that may be set.
        request.files = ImmutableMultiDict(list(files.items(multi=True)))
        request.environ[_USED], request.environ[_PUT_BACK] = used, again
        request.environ[_GONE] = gone


def gone_files() -> dict[str, list[tuple[str, str]]]:
    """The kept files this submit referred to whose copy is gone, by field: (file name,
    SHA-256) as the reference says. Counted as sent in its fingerprints, so that a repeat
    of the submit that took effect with them (and deleted them) is known as the same."""
    gone: dict[str, list[tuple[str, str]]] = request.environ.get(_GONE, {})
    return gone


def discard_used(state: State) -> None:
    """Delete the kept files this submit used, now that it took effect."""
    used = request.environ.get(_USED)
    if used:
        try:
            state.store.client.delete(*(state.store.key(f"upload:{ident}") for ident in used))
        except RedisError:
            # They expire with the TTL.
            pass


def kept_inputs(state: State, form: str) -> Markup:
    """The hidden inputs carrying the references of the files kept for ``form``."""
    kept: list[Kept] = request.environ.get(_KEPT, {}).get(form, [])
    name = input_name(state)
    return Markup("").join(
        Markup('<input type="hidden" name="%s" value="%s">') % (name, item.reference)
        for item in kept
    )


def kept_name(form: str, field: str) -> str | None:
    """The name of the file kept for ``field`` of ``form`` on this page, if one was."""
    kept: list[Kept] = request.environ.get(_KEPT, {}).get(form, [])
    for item in kept:
        if item.field == field:
            return item.filename
    return None


def _serializer(state: State) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(state.app.secret_key or "", salt=_SALT)


def _hashed(sid: str) -> str:
    """A browser session as a Redis key names it (never the session id itself)."""
    return binding(sid, "kept")
