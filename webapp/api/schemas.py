"""The JSON bodies of the order API as pydantic models: they validate requests,
shape responses, and give the OpenAPI document its schemas (webapp.api.openapi).

The limits come from :mod:`webapp.order_rules`, as the HTML form's do.
Whether the product is on sale is asked of PostgreSQL in :func:`validate_order`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_serializer,
)
from pydantic_core import PydanticCustomError
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import ORDER_STATUSES, Order, Product
from ..order_rules import (
    ADDRESS_MAX,
    EMAIL_MAX,
    NAME_MAX,
    QUANTITY_MAX,
    QUANTITY_MIN,
    SKU_MAX,
)
from ..problems import field_errors, printable

__all__ = ["OrderBody", "OrderRequest", "Problem", "order_json", "validate_order"]

def _email(value: str) -> str:
    try:
        validate_email(value, check_deliverability=False)
    except EmailNotValidError:
        raise PydanticCustomError(
            "email", "Give an email address like name@example.com.") from None
    return value  # as typed: the same as the HTML form stores it


def _text(limit: int) -> StringConstraints:
    return StringConstraints(strip_whitespace=True, min_length=1, max_length=limit)


class OrderRequest(BaseModel):
    """The body of POST /api/orders. Strict types: "2" is not a quantity."""
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    product: Annotated[str, Field(max_length=SKU_MAX, description="SKU, e.g. MUG-STONE"),
                       printable()]
    quantity: Annotated[int, Field(ge=QUANTITY_MIN, le=QUANTITY_MAX)]
    name: Annotated[str, _text(NAME_MAX), printable()]
    email: Annotated[str, _text(EMAIL_MAX), AfterValidator(_email),
                     Field(json_schema_extra={"format": "email"})]
    address: Annotated[str, _text(ADDRESS_MAX), printable("\r\n")]


#: The message for a field that fails a rule without a message of its own.
ORDER_MESSAGES = {
    "product": "Give the SKU of a product on sale, e.g. MUG-STONE.",
    "quantity": f"Give a whole number from {QUANTITY_MIN} to {QUANTITY_MAX}.",
    "name": f"Give 1 to {NAME_MAX} characters.",
    "email": f"Give 1 to {EMAIL_MAX} characters.",
    "address": f"Give 1 to {ADDRESS_MAX} characters.",
}


class OrderBody(BaseModel):
    """An order as the API shows it (and replays it)."""
    model_config = ConfigDict(title="Order")

    id: Annotated[str, Field(description="The order's key: names it in this API. Keep it "
                                         "private.")]
    order_number: Annotated[str, Field(description="What the customer quotes to support; "
                                                   "it opens nothing.")]
    payment_reference: Annotated[str, Field(
        description="What to give the payment provider for this order: its events name "
                    "the order by it (their order_id). It opens nothing.",
        examples=["pay_4f0c2b9e8a7d6c5b4a3f2e1d0c9b8a7f"])]
    status: Literal[ORDER_STATUSES]  # type: ignore[valid-type]
    product: str
    quantity: int
    unit_price_cents: int
    total_cents: int
    currency: Annotated[str, Field(description="ISO 4217 code of the amounts.",
                                   examples=["EUR"])]
    name: str
    email: str
    address: str
    created_at: Annotated[datetime, Field(json_schema_extra={"format": "date-time"})]

    @field_serializer("created_at")
    def _isoformat(self, value: datetime) -> str:
        return value.isoformat()  # "+00:00", as replays stored before pydantic say


class Problem(BaseModel):
    """An RFC 9457 problem; errors names each offending field."""
    type: str
    title: str
    status: int
    detail: str = ""
    errors: dict[str, str] = {}


def validate_order(db: Session, body: object) -> tuple[OrderRequest | None, dict[str, str]]:
    """The request if ``body`` is valid, else a message per offending field."""
    try:
        order = OrderRequest.model_validate(body)
        errors: dict[str, str] = {}
    except ValidationError as error:
        order, errors = None, field_errors(error, ORDER_MESSAGES)
    product = order.product if order else body.get("product") if isinstance(body, dict) \
        else None
    if "product" not in errors and "" not in errors and not _on_sale(db, product):
        errors["product"] = ORDER_MESSAGES["product"]
    return (order, errors) if not errors else (None, errors)


def _on_sale(db: Session, sku: object) -> bool:
    return isinstance(sku, str) and db.scalar(
        select(Product.id).where(Product.sku == sku, Product.active)) is not None


def order_json(order: Order) -> dict[str, Any]:
    """An order as the API shows it."""
    return OrderBody(
        id=order.public_id, order_number=order.order_number,
        payment_reference=order.payment_reference, status=order.status,
        product=order.product.sku, quantity=order.quantity,
        unit_price_cents=order.unit_price_cents, total_cents=order.total_cents,
        currency=order.currency, name=order.customer_name, email=order.email,
        address=order.shipping_address, created_at=order.created_at,
    ).model_dump(mode="json")

