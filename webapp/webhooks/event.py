"""The body of a payment provider's event, as a pydantic model (its schema is
in the OpenAPI document). Fields we do not use are ignored: providers add them."""

from __future__ import annotations

from typing import Annotated

from flask import request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ..problems import NOT_AN_OBJECT, ApiProblem, field_errors, printable, whole_number

__all__ = ["EFFECTS", "PaymentEvent", "parse_event"]

#: The event types that change an order; any other is acknowledged and ignored.
EFFECTS = ("payment.succeeded", "refund.succeeded")
MAX_AMOUNT_CENTS = 100_000_000

Name = Annotated[str, Field(min_length=1, max_length=255), printable()]
#: An ISO 4217 code in any case ("eur"), kept in upper case.
Currency = Annotated[
    str, Field(pattern=r"^[A-Za-z]{3}$", examples=["EUR"]), AfterValidator(str.upper)
]

MESSAGES = {
    "id": "Give 1 to 255 printable characters.",
    "type": "Give 1 to 255 printable characters.",
    "order_id": "Give 1 to 255 printable characters.",
    "amount_cents": f"Give a whole number of cents from 1 to {MAX_AMOUNT_CENTS}.",
    "currency": "Give the ISO 4217 code of the currency, such as EUR.",
    "charge": "Give 1 to 255 printable characters.",
    "metadata": "Give an object of at most 20 names and values, each 1 to 255 characters.",
}


class PaymentEvent(BaseModel):
    """One event; its id is the provider's, unique per event and kept on retries."""

    model_config = ConfigDict(strict=True, frozen=True)

    id: Name
    type: Annotated[
        Name,
        Field(
            description="Only these change an order; others are acknowledged and ignored.",
            examples=list(EFFECTS),
        ),
    ]
    order_id: Annotated[
        Name,
        Field(
            description="The order's payment reference "
            "(payment_reference): what the shop gave the provider "
            "for the payment. Never the order's key or number."
        ),
    ]
    amount_cents: Annotated[int, Field(ge=1, le=MAX_AMOUNT_CENTS), whole_number()]
    currency: Annotated[
        Currency | None, Field(description="Required on the events that change an order.")
    ] = None
    charge: Annotated[
        Name | None,
        Field(
            description="The provider's charge a payment is, when it is one: the checkout's "
            "own charge pays its order once, whichever of the two records it."
        ),
    ] = None
    metadata: Annotated[
        dict[Name, Name] | None,
        Field(
            max_length=20,
            description="The charge's metadata, as the shop set it: the checkout's charge "
            "names its submission, and only a charge that does is taken for it.",
        ),
    ] = None


def parse_event() -> PaymentEvent:
    """The event in the (already authenticated) body; 400/422 if malformed."""
    try:
        body = request.get_json(silent=True) if request.is_json else None
    # nested too deeply for json.loads; silent=True lets it by
    except RecursionError:
        body = None
    if not isinstance(body, dict):
        raise ApiProblem("malformed-json", NOT_AN_OBJECT)
    try:
        event = PaymentEvent.model_validate(body)
    except ValidationError as error:
        errors = {
            name: MESSAGES.get(name, message)
            for name, message in field_errors(error, MESSAGES).items()
        }
        raise ApiProblem(
            "validation-error", "Fix the fields listed in errors.", errors=errors
        ) from None
    # money without a currency
    if event.type in EFFECTS and event.currency is None:
        raise ApiProblem(
            "validation-error",
            "Fix the fields listed in errors.",
            errors={"currency": MESSAGES["currency"]},
        )
    return event
