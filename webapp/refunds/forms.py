"""The refund form: an amount in euros, at most what is left to refund (paid,
less refunded, less requested and not yet applied)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from flask_wtf import FlaskForm
from wtforms import StringField
from wtforms.validators import ValidationError

__all__ = ["RefundForm", "euros"]


def euros(cents: int) -> str:
    return f"€{cents / 100:,.2f}"


class RefundForm(FlaskForm):
    amount = StringField("Amount to refund (€)",
                         filters=[lambda v: v.strip() if isinstance(v, str) else v])

    def __init__(self, left_cents: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.left_cents = left_cents
        self.cents = 0

    def validate_amount(self, field: StringField) -> None:
        """Parsed here, not by DecimalField: "NaN", "Infinity" and "1e999999" are
        valid Decimals that must get a message, not a server error."""
        if not field.data:
            raise ValidationError("Enter the amount to refund.")
        try:
            value = Decimal(field.data.replace(",", "."))
        except InvalidOperation:
            raise ValidationError("Enter an amount like 12.50.") from None
        if not value.is_finite() or value <= 0:
            raise ValidationError("Enter an amount like 12.50.")
        if value > Decimal(self.left_cents).scaleb(-2) and self.left_cents <= 0:
            raise ValidationError("Nothing is left to refund: the rest is already requested "
                                  "and waiting to be applied.")
        if value > Decimal(self.left_cents).scaleb(-2):
            raise ValidationError(f"You can refund at most {euros(self.left_cents)}.")
        if (value * 100) % 1:
            raise ValidationError("Use at most two decimals (whole cents).")
        self.cents = int(value * 100)
