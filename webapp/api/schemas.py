"""The JSON bodies of the order API as pydantic models: they validate requests,
shape responses, and give the OpenAPI document its schemas (webapp.api.openapi).

The limits come from :mod:`webapp.shop.order_rules`, as the HTML form's do.
Whether the product is on sale is asked of PostgreSQL in :func:`validate_order`;
:func:`skus_on_sale` gives the document the same list.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email
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

from ..problems import field_errors, printable, whole_number
from ..products.rules import PRICE_MAX_CENTS
from ..shop.models import ORDER_STATUSES, Order, Product
from ..shop.order_rules import (
    ADDRESS_MAX,
    EMAIL_MAX,
    NAME_MAX,
    QUANTITY_MAX,
    QUANTITY_MIN,
    SKU_MAX,
)

__all__ = ["OrderBody", "OrderRequest", "Problem", "order_json", "skus_on_sale", "validate_order"]


def _email(value: str) -> str:
    try:
        validate_email(value, check_deliverability=False)
    except EmailNotValidError:
        raise PydanticCustomError("email", "Give an email address like name@example.com.") from None
    # as typed: the same as the HTML form stores it
    return value


#: What pydantic's strip_whitespace takes off the ends: Unicode's White_Space, which is
#: Python's isspace() but for U+001C-U+001F. Every one but the space is also refused inside
#: a field, as are the C0 and C1 controls (printable()).
_BLANKS = frozenset(c for c in range(0x10000) if chr(c).isspace()) - frozenset(range(0x1C, 0x20))
_CONTROLS = frozenset(range(0x20)) | frozenset(range(0x7F, 0xA0))


def _char_class(codes: frozenset[int], *, negate: bool) -> str:
    """A regex class of ``codes`` (``\\uXXXX`` ranges: Python and JSON Schema alike)."""
    ranges: list[list[int]] = []
    for code in sorted(codes):
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    body = "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    return f"[{'^' if negate else ''}{body}]"


def _text_pattern(limit: int, allow: str) -> str:
    """The field as validated: blanks at the ends ignored, then 1 to ``limit`` characters
    with no control character (but ``allow``) and no blank at either end."""
    refused = (_CONTROLS | _BLANKS) - {ord(" ")} - {ord(c) for c in allow}
    inner, edge = _char_class(refused, negate=True), _char_class(refused | _BLANKS, negate=True)
    blanks = _char_class(_BLANKS, negate=False)
    return f"^{blanks}*{edge}(?:{inner}{{0,{limit - 2}}}{edge})?{blanks}*$"


def _text(limit: int, allow: str = "") -> Any:
    """A text field: stripped, 1 to ``limit`` characters, printable. Documented by a
    pattern, not min/maxLength, which would count the blanks the strip takes off."""

    def document(schema: dict[str, Any]) -> None:
        schema.pop("minLength", None)
        schema.pop("maxLength", None)
        schema["pattern"] = _text_pattern(limit, allow)

    return Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=limit),
        printable(allow),
        Field(json_schema_extra=document),
    ]


def _no_special_use_domain() -> str:
    """email_validator refuses the special-use domains (``.test``, ``.localhost``, ...)
    that format "email" admits: a pattern says so, any letter case."""
    names = "|".join(
        "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in name)
        for name in SPECIAL_USE_DOMAIN_NAMES
    )
    return f"^(?!.*[@.](?:{names})$)"


class OrderRequest(BaseModel):
    """The body of POST /api/orders. Strict types: "2" is not a quantity."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # The document lists the SKUs on sale (openapi.py): only those are accepted.
    product: Annotated[
        str, Field(min_length=1, max_length=SKU_MAX, description="SKU, e.g. MUG-STONE"), printable()
    ]
    quantity: Annotated[int, Field(ge=QUANTITY_MIN, le=QUANTITY_MAX), whole_number()]
    name: _text(NAME_MAX)  # type: ignore[valid-type]
    email: Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=EMAIL_MAX),
        AfterValidator(_email),
        Field(json_schema_extra={"format": "email", "pattern": _no_special_use_domain()}),
    ]
    address: _text(ADDRESS_MAX, "\r\n")  # type: ignore[valid-type]
    expected_unit_price_cents: Annotated[
        int | None,
        Field(
            ge=0,
            le=PRICE_MAX_CENTS,
            description="Optional: the unit price, in cents, your customer was shown. If the "
            "product no longer costs this, nothing is placed (409 price-changed).",
        ),
        whole_number(),
    ] = None


#: The message for a field that fails a rule without a message of its own.
ORDER_MESSAGES = {
    "product": "Give the SKU of a product on sale, e.g. MUG-STONE.",
    "quantity": f"Give a whole number from {QUANTITY_MIN} to {QUANTITY_MAX}.",
    "name": f"Give 1 to {NAME_MAX} characters.",
    "email": f"Give 1 to {EMAIL_MAX} characters.",
    "address": f"Give 1 to {ADDRESS_MAX} characters.",
    "expected_unit_price_cents": f"Give a whole number of cents from 0 to {PRICE_MAX_CENTS}.",
}


class OrderBody(BaseModel):
    """An order as the API shows it (and replays it)."""

    model_config = ConfigDict(title="Order")

    id: Annotated[str, Field(description="The order's key: names it in this API. Keep it private.")]
    order_number: Annotated[
        str, Field(description="What the customer quotes to support; it opens nothing.")
    ]
    payment_reference: Annotated[
        str,
        Field(
            description="What to give the payment provider for this order: its events name "
            "the order by it (their order_id). It opens nothing.",
            examples=["pay_4f0c2b9e8a7d6c5b4a3f2e1d0c9b8a7f"],
        ),
    ]
    status: Literal[ORDER_STATUSES]  # type: ignore[valid-type]
    product: str
    quantity: int
    unit_price_cents: int
    total_cents: int
    currency: Annotated[str, Field(description="ISO 4217 code of the amounts.", examples=["EUR"])]
    name: str
    email: str
    address: str
    created_at: Annotated[datetime, Field(json_schema_extra={"format": "date-time"})]

    @field_serializer("created_at")
    def _isoformat(self, value: datetime) -> str:
        # "+00:00", as replays stored before pydantic say
        return value.isoformat()


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
    product = order.product if order else body.get("product") if isinstance(body, dict) else None
    if "product" not in errors and "" not in errors and not _on_sale(db, product):
        errors["product"] = ORDER_MESSAGES["product"]
    return (order, errors) if not errors else (None, errors)


def _on_sale(db: Session, sku: object) -> bool:
    return (
        isinstance(sku, str)
        and db.scalar(select(Product.id).where(Product.sku == sku, Product.active)) is not None
    )


def skus_on_sale(db: Session) -> list[str]:
    """What ``product`` may be now, in catalogue order (the OpenAPI document's enum)."""
    return list(db.scalars(select(Product.sku).where(Product.active).order_by(Product.id)))


def order_json(order: Order) -> dict[str, Any]:
    """An order as the API shows it."""
    return OrderBody(
        id=order.public_id,
        order_number=order.order_number,
        payment_reference=order.payment_reference,
        status=order.status,
        product=order.product.sku,
        quantity=order.quantity,
        unit_price_cents=order.unit_price_cents,
        total_cents=order.total_cents,
        currency=order.currency,
        name=order.customer_name,
        email=order.email,
        address=order.shipping_address,
        created_at=order.created_at,
    ).model_dump(mode="json")
