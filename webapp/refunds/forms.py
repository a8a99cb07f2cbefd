"""The refund form: an amount in euros, at most what is left to refund (paid,
less refunded, less requested and not yet applied), and a photo if the customer has one
(what is accepted: photos.py)."""

from __future__ import annotations

from flask_wtf.file import FileAllowed, FileField
from wtforms import StringField
from wtforms.validators import ValidationError

from ..forms import ShopForm
from ..shop.amounts import euros, parse_cents
from .photos import Photo, max_photo_bytes, max_photo_mib, photo_type

__all__ = ["RefundForm", "euros", "parse_cents"]

NOT_A_PHOTO = "Attach a photo as a JPEG, PNG or WebP image (not an SVG or another kind of file)."
PHOTO_TOO_LARGE = "This photo is larger than {mib} MiB: attach a smaller one (or none)."


class RefundForm(ShopForm):
    amount = StringField(
        "Amount to refund (€)", filters=[lambda v: v.strip() if isinstance(v, str) else v]
    )
    # The name first (a quick word for a .pdf), then the bytes themselves (validate_photo).
    photo = FileField(
        "A photo of the item (optional)",
        validators=[FileAllowed(["jpg", "jpeg", "png", "webp"], NOT_A_PHOTO)],
    )

    def __init__(self, left_cents: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.left_cents = left_cents
        self.cents = 0
        self.accepted_photo: Photo | None = None

    def validate_amount(self, field: StringField) -> None:
        """Parsed here, strictly, not by DecimalField: a refund is whole cents, at
        least one, at most what is left."""
        if not field.data:
            raise ValidationError("Enter the amount to refund.")
        cents = parse_cents(field.data)
        if cents is not None and cents < 1:
            raise ValidationError("Enter at least €0.01.")
        if cents is None or cents > self.left_cents:
            if self.left_cents <= 0:
                raise ValidationError(
                    "Nothing is left to refund: the rest is already "
                    "requested and waiting to be applied."
                )
            raise ValidationError(f"You can refund at most {euros(self.left_cents)}.")
        self.cents = cents

    def validate_photo(self, field: FileField) -> None:
        """What the bytes are, not what the name or the browser says: a JPEG, PNG or WebP
        by its magic number, at most ``REFUND_PHOTO_MAX_BYTES``. Read once, and rewound."""
        upload = field.data
        if not upload:
            return
        limit = max_photo_bytes()
        upload.stream.seek(0)
        data = upload.stream.read(limit + 1)
        upload.stream.seek(0)
        if len(data) > limit:
            raise ValidationError(PHOTO_TOO_LARGE.format(mib=max_photo_mib()))
        content_type = photo_type(data[:12])
        if content_type is None:
            raise ValidationError(NOT_A_PHOTO)
        self.accepted_photo = Photo(upload, data, content_type)
