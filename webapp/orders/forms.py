"""The order form: every rule a field must meet, checked before any token is spent.

The limits come from :mod:`webapp.order_rules`, which the JSON API reads too.
"""

from __future__ import annotations

from wtforms import EmailField, IntegerField, SelectField, StringField, TextAreaField
from wtforms.validators import Email, InputRequired, Length, NumberRange, ValidationError

from ..forms import ShopForm
from ..models import Product
from ..order_rules import (
    ADDRESS_MAX,
    EMAIL_MAX,
    NAME_MAX,
    QUANTITY_MAX,
    QUANTITY_MIN,
    has_control_chars,
)

__all__ = ["OrderForm"]


def _strip(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


class _PlainWording:
    """WTForms' own messages for values a person can type or tamper with, in plain words."""
    WORDING = {
        "Not a valid integer value.": "Enter a whole number.",
        "Invalid Choice: could not coerce.": "Choose one of the products on sale.",
    }

    def gettext(self, string: str) -> str:
        return self.WORDING.get(string, string)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.gettext(singular if n == 1 else plural)


class OrderForm(ShopForm):
    class Meta:
        def get_translations(self, form: object) -> _PlainWording:
            return _PlainWording()

    product = SelectField("Product", coerce=int, validate_choice=False,
                          validators=[InputRequired("Choose a product.")])
    quantity = IntegerField("Quantity", default=1, validators=[
        InputRequired("Enter how many you want."),
        NumberRange(QUANTITY_MIN, QUANTITY_MAX,
                    f"Choose a quantity from {QUANTITY_MIN} to {QUANTITY_MAX}."),
    ])
    name = StringField("Full name", filters=[_strip], validators=[
        InputRequired("Enter your name."),
        Length(max=NAME_MAX, message=f"Use at most {NAME_MAX} characters."),
    ])
    email = EmailField("Email", filters=[_strip], validators=[
        InputRequired("Enter your email address."),
        Length(max=EMAIL_MAX, message=f"Use at most {EMAIL_MAX} characters."),
        Email("Enter an email address like name@example.com.", check_deliverability=False),
    ])
    address = TextAreaField("Shipping address", filters=[_strip], validators=[
        InputRequired("Enter the address we should ship to."),
        Length(max=ADDRESS_MAX, message=f"Use at most {ADDRESS_MAX} characters."),
    ])

    def __init__(self, products: list[Product], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.products = {product.id: product for product in products}
        # The price first: a phone's list shows what fits of the label, and at 320 px
        # that is not a long name and its price (the price was cut to "€12").
        self.product.choices = [(p.id, f"€{p.price_cents / 100:.2f} · {p.name}")
                                for p in products]

    def validate_product(self, field: SelectField) -> None:
        if field.data not in self.products:
            raise ValidationError("Choose one of the products on sale.")

    def validate_name(self, field: StringField) -> None:
        _printable(field)

    def validate_address(self, field: TextAreaField) -> None:
        _printable(field, allow="\r\n")


def _printable(field: StringField, allow: str = "") -> None:
    if not field.data:
        raise ValidationError("This field is required.")
    if has_control_chars(field.data, allow):
        raise ValidationError("Remove the control characters from this field.")
