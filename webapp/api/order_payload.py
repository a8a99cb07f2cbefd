"""The JSON body of ``POST /api/orders``: the same rules as the HTML order form."""

from __future__ import annotations

from dataclasses import dataclass

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Product

__all__ = ["FIELDS", "OrderRequest", "validate_order"]

FIELDS = ("product", "quantity", "name", "email", "address")


@dataclass(frozen=True)
class OrderRequest:
    product_sku: str
    quantity: int
    name: str
    email: str
    address: str


def validate_order(db: Session, body: object) -> tuple[OrderRequest | None, dict[str, str]]:
    """The request if ``body`` is valid, else a message per offending field."""
    if not isinstance(body, dict):
        return None, {"": "The body must be a JSON object."}
    errors = {name: "Unknown field." for name in body if name not in FIELDS}
    product = body.get("product")
    if not isinstance(product, str) or not product.isprintable() or len(product) > 32 \
            or not db.scalar(
            select(Product.id).where(Product.sku == product, Product.active)):
        errors["product"] = "Give the SKU of a product on sale, e.g. MUG-STONE."
    quantity = body.get("quantity")
    if type(quantity) is not int or not 1 <= quantity <= 99:
        errors["quantity"] = "Give a whole number from 1 to 99."
    name = _text(body, "name", 100, errors)
    address = _text(body, "address", 500, errors, allow="\r\n")
    email = _text(body, "email", 254, errors)
    if email is not None:
        try:
            validate_email(email, check_deliverability=False)
        except EmailNotValidError:
            errors["email"] = "Give an email address like name@example.com."
    if errors:
        return None, errors
    return OrderRequest(product, quantity, name, email, address), {}  # type: ignore[arg-type]


def _text(body: dict, name: str, limit: int, errors: dict[str, str],
          allow: str = "") -> str | None:
    value = body.get(name)
    value = value.strip() if isinstance(value, str) else None
    if not value or len(value) > limit:
        errors[name] = f"Give 1 to {limit} characters."
        return None
    if any(not ch.isprintable() and ch not in allow for ch in value):
        errors[name] = "Remove the control characters."
        return None
    return value
