"""Amounts in euros as people type and read them: the refund form, the products
commands and the order's messages all say and read money the same way."""

from __future__ import annotations

import re

from wtforms.validators import ValidationError

__all__ = ["LIKE", "euros", "parse_cents"]

#: Euros, then at most two decimals after "." or ",": "12", "12.5", "12,50", ".50".
#: ASCII digits only, and no sign, exponent or "_": Decimal (and ``\d``) accept those,
#: and "1e-999999999" became 0 cents that only the database's CHECK refused.
AMOUNT = re.compile(r"([0-9]*)(?:[.,]([0-9]*))?")
#: More euro digits than this is more than any order holds (amounts are INTEGER cents),
#: so the number is not even converted (int() refuses strings past 4,300 digits). Zeros
#: in front count too: "0" * 5000 + "1" is no amount anyone types, and was a 500.
MAX_EURO_DIGITS = 8

LIKE = "Enter an amount like 12.50."


def euros(cents: int) -> str:
    return f"€{cents / 100:,.2f}"


def parse_cents(text: str) -> int | None:
    """``text`` as whole cents, or None when it has too many euro digits to be any
    order's amount. Raises ValidationError, with what to type, when it is no amount."""
    match = AMOUNT.fullmatch(text)
    whole, decimals = (match.group(1), match.group(2) or "") if match else ("", "")
    if not whole and not decimals:
        raise ValidationError(LIKE)
    if len(decimals) > 2:
        raise ValidationError("Use at most two decimals (whole cents).")
    if len(whole.lstrip("0")) > MAX_EURO_DIGITS:
        return None
    if len(whole) > MAX_EURO_DIGITS:
        raise ValidationError(LIKE)
    return int(whole or "0") * 100 + int(decimals.ljust(2, "0"))
