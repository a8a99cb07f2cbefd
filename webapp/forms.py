"""The order form: every rule a field must meet, checked before any token is spent."""

from __future__ import annotations

import time

from flask import current_app, has_app_context
from flask_wtf import FlaskForm
from sqlalchemy import select
from sqlalchemy.orm import Session
from wtforms import EmailField, IntegerField, SelectField, StringField, TextAreaField
from wtforms.validators import Email, InputRequired, Length, NumberRange, ValidationError

from .models import Product


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


class OrderForm(FlaskForm):
    class Meta:
        def get_translations(self, form: object) -> _PlainWording:
            return _PlainWording()

    product = SelectField("Product", coerce=int, validate_choice=False,
                          validators=[InputRequired("Choose a product.")])
    quantity = IntegerField("Quantity", default=1, validators=[
        InputRequired("Enter how many you want."),
        NumberRange(1, 99, "Choose a quantity from 1 to 99."),
    ])
    name = StringField("Full name", filters=[_strip], validators=[
        InputRequired("Enter your name."), Length(max=100, message="Use at most 100 characters."),
    ])
    email = EmailField("Email", filters=[_strip], validators=[
        InputRequired("Enter your email address."),
        Length(max=254, message="Use at most 254 characters."),
        Email("Enter an email address like name@example.com.", check_deliverability=False),
    ])
    address = TextAreaField("Shipping address", filters=[_strip], validators=[
        InputRequired("Enter the address we should ship to."),
        Length(max=500, message="Use at most 500 characters."),
    ])

    def __init__(self, products: list[Product], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.products = {product.id: product for product in products}
        self.product.choices = [(p.id, f"{p.name} — €{p.price_cents / 100:.2f}") for p in products]

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
    if any(not ch.isprintable() and ch not in allow for ch in field.data):
        raise ValidationError("Remove the control characters from this field.")


#: (when it was read, the products): shared by this process's threads.
_catalogue: tuple[float, list[Product]] = (float("-inf"), [])


def active_products(db: Session, *, max_age: float | None = None) -> list[Product]:
    """The products on sale, in catalogue order, as read at most ``max_age`` seconds
    ago (default: the app's ``CATALOGUE_CACHE_SECONDS``; 0 reads every time).

    Reusing a recent read saves a PostgreSQL round trip on every form and submit, and
    is safe: the submit reads the product again inside its transaction, so one taken
    off sale meanwhile is refused, never sold.
    """
    global _catalogue
    if max_age is None:
        max_age = current_app.config.get("CATALOGUE_CACHE_SECONDS", 0) if has_app_context() \
            else 0
    read_at, products = _catalogue
    now = time.monotonic()
    if max_age and now - read_at < max_age:
        return list(products)
    products = list(db.scalars(select(Product).where(Product.active).order_by(Product.id)))
    _catalogue = (now, products)
    return list(products)


def last_known_products() -> list[Product]:
    """The catalogue as last read, to redraw a form while PostgreSQL is away."""
    return list(_catalogue[1])
