"""What a product must be before it is written: a SKU, a name, a price in euros, a
description. The ``products`` commands (add, price, import) read them here, one row
or a whole CSV file (:func:`read_csv`), so a file cannot hold what a command refuses.

Prices are read by the shop's money rule (:func:`webapp.refunds.forms.parse_cents`:
"12.50", "12,50", "12"; ASCII digits, at most two decimals, no sign or exponent).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from wtforms.validators import ValidationError

from ..shop.amounts import euros, parse_cents
from ..shop.order_rules import PRODUCT_NAME_MAX, QUANTITY_MAX, SKU_MAX, has_control_chars

__all__ = [
    "COLUMNS",
    "DESCRIPTION_MAX",
    "PRICE_MAX_CENTS",
    "BadProduct",
    "ProductRow",
    "check_description",
    "check_name",
    "check_price",
    "check_sku",
    "read_csv",
]

#: Letters, digits and ``-``, ``_`` or ``.`` after the first: what a partner types
#: in an API order's ``product``, and what fits a URL or a label as it is.
SKU = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{SKU_MAX - 1}}}")
DESCRIPTION_MAX = 1000
#: An order's total (price x quantity, up to QUANTITY_MAX) is an INTEGER of cents.
PRICE_MAX_CENTS = (2**31 - 1) // QUANTITY_MAX
#: A CSV file's header: these columns, description optional, in any order.
COLUMNS = ("sku", "name", "price_eur", "description")
REQUIRED = COLUMNS[:3]
T = TypeVar("T")


class BadProduct(ValueError):
    """A value a product cannot have; the message says what to give instead."""


@dataclass(frozen=True)
class ProductRow:
    """One line of a CSV file, checked; ``description`` None when the file has none."""

    line: int
    sku: str
    name: str
    price_cents: int
    description: str | None


def check_sku(value: str) -> str:
    sku = value.strip()
    if not SKU.fullmatch(sku):
        raise BadProduct(
            f"give 1 to {SKU_MAX} letters, digits, '-', '_' or '.' "
            "(starting with a letter or digit), e.g. MUG-STONE"
        )
    return sku


def check_name(value: str) -> str:
    name = value.strip()
    if not 1 <= len(name) <= PRODUCT_NAME_MAX or has_control_chars(name):
        raise BadProduct(f"give 1 to {PRODUCT_NAME_MAX} printable characters")
    return name


def check_price(value: str) -> int:
    """Euros as typed (``12.50``) -> cents, from €0.01 to :data:`PRICE_MAX_CENTS`."""
    try:
        cents = parse_cents(value.strip())
    except ValidationError as error:
        raise BadProduct(f"{value.strip()!r} is not a price in euros: {error}") from None
    if cents is not None and cents < 1:
        raise BadProduct("a price is at least 0.01 (€0.01)")
    if cents is None or cents > PRICE_MAX_CENTS:
        raise BadProduct(
            f"a price is at most {PRICE_MAX_CENTS / 100:.2f} "
            f"({euros(PRICE_MAX_CENTS)}), so that {QUANTITY_MAX} of it still "
            "fit one order's total"
        )
    return cents


def check_description(value: str) -> str:
    description = value.strip()
    if len(description) > DESCRIPTION_MAX or has_control_chars(description, allow="\r\n"):
        raise BadProduct(f"give at most {DESCRIPTION_MAX} printable characters")
    return description


def read_csv(path: Path) -> list[ProductRow]:
    """Every row of ``path`` checked, or :class:`BadProduct` naming the first bad line
    (``line 7: price_eur: ...``); nothing is returned from a file with a bad line."""
    rows: list[ProductRow] = []
    seen: dict[str, int] = {}
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark.
        with path.open(encoding="utf-8-sig", newline="") as file:
            for row in _records(file):
                if row.sku in seen:
                    raise BadProduct(
                        f"line {row.line}: sku {row.sku} is on line {seen[row.sku]} too"
                    )
                seen[row.sku] = row.line
                rows.append(row)
    except UnicodeDecodeError:
        raise BadProduct("the file is not UTF-8 text: save it as CSV UTF-8") from None
    except OSError as error:
        raise BadProduct(f"cannot read it: {error.strerror or error}") from None
    if not rows:
        raise BadProduct(
            f"it has no products: after the header {','.join(REQUIRED)}"
            "[,description], one line a product"
        )
    return rows


def _records(file: IO[str]) -> Iterator[ProductRow]:
    reader = csv.reader(file, strict=True)
    line = 1
    try:
        header = [name.strip().lower() for name in next(reader, [])]
        if sorted(header) not in (sorted(REQUIRED), sorted(COLUMNS)):
            raise BadProduct(
                f"line 1: the header must be {','.join(REQUIRED)} or "
                f"{','.join(COLUMNS)}, not {','.join(header) or 'empty'}"
            )
        while True:
            # where the next record starts
            line = reader.line_num + 1
            fields = next(reader, None)
            if fields is None:
                return
            if not any(field.strip() for field in fields):
                # a blank line
                continue
            if len(fields) != len(header):
                raise BadProduct(f"line {line}: {len(fields)} fields, the header has {len(header)}")
            yield _row(line, dict(zip(header, fields, strict=True)))
    except csv.Error as error:
        raise BadProduct(f"line {line}: {error}") from None


def _row(line: int, fields: dict[str, str]) -> ProductRow:
    def checked(column: str, check: Callable[[str], T]) -> T:
        try:
            return check(fields[column])
        except BadProduct as bad:
            raise BadProduct(f"line {line}: {column}: {bad}") from None

    return ProductRow(
        line,
        checked("sku", check_sku),
        checked("name", check_name),
        checked("price_eur", check_price),
        checked("description", check_description) if "description" in fields else None,
    )
