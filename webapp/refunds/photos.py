"""The photo a customer may attach to a refund request: what is accepted, and where it goes.

What is accepted: a JPEG, PNG or WebP image, recognised by its first bytes (its magic
number), never by its name or the type the browser sent; at most
``REFUND_PHOTO_MAX_BYTES`` (5 MiB). No SVG: it is a document that can carry script. The
refund submit alone may send a body that large (views.py, ``allow_a_photo``); every other
request keeps ``MAX_CONTENT_LENGTH``. On a 422 the library keeps the upload (in Redis,
under a signed reference in the form drawn again), so the customer does not pick it again.

Where it goes: ``refund_photos``, one row a request, in the submit's one transaction
(:func:`attach_photo`), so a storm of duplicates stores one request and one photo.

Who sees it: the operator reviewing the request (``flask --app webapp refunds photo``,
reviews.py), behind the same door as ``refunds approve``. No page serves it: the order's
link, which a customer forwards to whoever pays or returns, opens nothing of it.
"""

from __future__ import annotations

from flask import current_app
from sqlalchemy.orm import Session
from werkzeug.datastructures import FileStorage
from werkzeug.utils import secure_filename

from ..shop.models import PHOTO_NAME_MAX, RefundPhoto, RefundRequest

__all__ = ["Photo", "attach_photo", "max_photo_bytes", "max_photo_mib", "photo_type"]


def max_photo_bytes() -> int:
    """``REFUND_PHOTO_MAX_BYTES``: the largest photo a refund request may carry."""
    return int(current_app.config["REFUND_PHOTO_MAX_BYTES"])


def max_photo_mib() -> str:
    """:func:`max_photo_bytes` in MiB, as a page says it ("5")."""
    return f"{max_photo_bytes() / 2**20:g}"


def photo_type(head: bytes) -> str | None:
    """The image type ``head`` (a file's first 12 bytes or more) starts as, by its magic
    number, or None if it is none we take."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    # A RIFF container (its size in bytes 4-7) holding WebP.
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


class Photo:
    """A photo the refund form accepted: its bytes, the type they are, a safe name."""

    def __init__(self, upload: FileStorage, data: bytes, content_type: str) -> None:
        self.data = data
        self.content_type = content_type
        # Made safe: the operator's terminal prints it, and it names a file they save.
        self.filename = secure_filename(upload.filename or "")[:PHOTO_NAME_MAX] or "photo"


def attach_photo(db: Session, refund_request: RefundRequest, photo: Photo) -> RefundPhoto:
    """Store ``photo`` with ``refund_request``, in ``db``'s transaction (the request is
    flushed: a duplicate submit failed on its UNIQUE key before getting here)."""
    row = RefundPhoto(
        refund_request_id=refund_request.id,
        content_type=photo.content_type,
        filename=photo.filename,
        data=photo.data,
    )
    db.add(row)
    return row
