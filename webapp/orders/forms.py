"""The order form: every rule a field must meet, checked before any token is spent.

The limits come from :mod:`webapp.shop.order_rules`, which the JSON API reads too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from wtforms import (
    BooleanField,
    EmailField,
    HiddenField,
    IntegerField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import Email, InputRequired, Length, ValidationError

from ..forms import ShopForm
from ..payments.client import CardRefused, PaymentMethod, ProviderClient, ProviderError
from ..shop.models import Product
from ..shop.order_rules import (
    ADDRESS_MAX,
    EMAIL_MAX,
    NAME_MAX,
    QUANTITY_MAX,
    QUANTITY_MIN,
    has_control_chars,
)
from ..shop.placing import OrderDetails

__all__ = ["CardOrderForm", "OrderForm"]

#: One product's shown price in ``shown_prices``: ids and cents of at most 9 digits.
SHOWN_PRICE = re.compile(r"(?<!\S)([1-9][0-9]{0,8}):([0-9]{1,9})(?!\S)")
#: What a payment method's token looks like (checked before it goes into a URL).
PAYMENT_METHOD = re.compile(r"pm_[A-Za-z0-9]{1,60}")
SAMPLE_CARDS = (
    "Test cards: 4242 4242 4242 4242 pays; 4000 0000 0000 0002 is declined; "
    "4000 0000 0000 0119 pays after the provider's retry."
)
#: A product sent while its name cannot be read (see ``OrderForm.keep_the_product_sent``).
PRODUCT_NOT_SHOWN = "The product you chose (its details cannot be shown right now)"
CARD_MISSING = "Enter the card number."
CARD_SHAPE = "Enter the 12 to 19 digits of the card number."
CARD_INVALID = "This card number is not valid: check it, or use another card."
CARD_CHECKS_SPENT = (
    "We have checked your card too many times from this browser in a short while, so we "
    "did not check it again and nothing was charged. Please try again in a few minutes."
)
CARD_UNCHECKED = (
    "We could not reach our payment provider to check your card, so nothing "
    "was charged. Submit again in a moment."
)


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


def _between(low: int, high: int, message: str) -> Callable[[Any, Any], None]:
    """WTForms' NumberRange, in whole numbers only: NumberRange asks ``math.isnan`` of
    the number, which turns it into a float, and an integer of 309 digits or more (int()
    takes up to 4,300) is too large for one: an OverflowError, a 500."""

    def check(form: Any, field: Any) -> None:
        if not isinstance(field.data, int) or not low <= field.data <= high:
            raise ValidationError(message)

    return check


class OrderForm(ShopForm):
    class Meta:
        def get_translations(self, form: object) -> _PlainWording:
            return _PlainWording()

    product = SelectField(
        "Product",
        coerce=int,
        validate_choice=False,
        validators=[InputRequired("Choose a product.")],
    )
    quantity = IntegerField(
        "Quantity",
        default=1,
        validators=[
            InputRequired("Enter how many you want."),
            _between(
                QUANTITY_MIN,
                QUANTITY_MAX,
                f"Choose a quantity from {QUANTITY_MIN} to {QUANTITY_MAX}.",
            ),
        ],
    )
    name = StringField(
        "Full name",
        filters=[_strip],
        validators=[
            InputRequired("Enter your name."),
            Length(max=NAME_MAX, message=f"Use at most {NAME_MAX} characters."),
        ],
    )
    email = EmailField(
        "Email",
        filters=[_strip],
        validators=[
            InputRequired("Enter your email address."),
            Length(max=EMAIL_MAX, message=f"Use at most {EMAIL_MAX} characters."),
            Email("Enter an email address like name@example.com.", check_deliverability=False),
        ],
    )
    address = TextAreaField(
        "Shipping address",
        filters=[_strip],
        validators=[
            InputRequired("Enter the address we should ship to."),
            Length(max=ADDRESS_MAX, message=f"Use at most {ADDRESS_MAX} characters."),
        ],
    )

    #: "Yes, place another": the number of the identical order it confirms a second of
    #: (webapp/orders/same_order.py); drawn as a check box only when that is asked.
    same_again = HiddenField(filters=[_strip])
    #: The price of each product as this page showed it (``1:1800 2:1250``), written from
    #: the same catalogue read that drew the list (:meth:`prices_drawn`), so the submit
    #: can be charged only what its page showed (webapp/shop/placing.py, ``check_price``).
    shown_prices = HiddenField()
    #: "Use today's price": an update of an order to the price its product has now (drawn
    #: only where that differs from the order's; without it the order keeps its price).
    new_price = BooleanField()

    def __init__(self, products: list[Product], **kwargs: object) -> None:
        super().__init__(**kwargs)
        #: Set by the view: the identical order placed minutes ago that this one would
        #: repeat unconfirmed, or None; read once the fields are valid.
        self.same_order_check: Callable[[OrderForm], Any] | None = None
        #: What that check found (the form page asks about it).
        self.same_order: Any = None
        self.products: dict[int, Product | None] = {product.id: product for product in products}
        #: The prices this page shows, by product id: the catalogue's (possibly cached)
        #: read, or a price the submit's transaction found changed (:meth:`show_price`).
        #: Kept apart from the products, which are shared by the process's requests.
        self.prices: dict[int, int] = {product.id: product.price_cents for product in products}
        self._label_products()

    def _label_products(self) -> None:
        # The price first: a phone's list shows what fits of the label, and at 320 px
        # that is not a long name and its price (the price was cut to "€12").
        self.product.choices = [
            (p.id, f"€{self.prices[p.id] / 100:.2f} · {p.name}")
            for p in self.products.values()
            if p is not None
        ]

    def show_price(self, product_id: int, price_cents: int) -> None:
        """Draw ``product_id`` at ``price_cents`` (the price its transaction read) from now on."""
        if product_id in self.prices:
            self.prices[product_id] = price_cents
            self._label_products()

    def prices_drawn(self) -> str:
        """The ``shown_prices`` this page writes: the prices it shows; with none shown
        (no catalogue to draw, :meth:`keep_the_product_sent`), the ones sent, which the
        page the shopper chose from showed."""
        if self.prices:
            return " ".join(f"{id_}:{cents}" for id_, cents in self.prices.items())
        return " ".join(f"{id_}:{cents}" for id_, cents in self._prices_sent().items())

    def _prices_sent(self) -> dict[int, int]:
        """``shown_prices`` as sent; pairs that are not a product id and a price of at
        most 9 digits each are left out (so nothing long is ever converted)."""
        return {
            int(id_): int(cents) for id_, cents in SHOWN_PRICE.findall(self.shown_prices.data or "")
        }

    def price_shown(self) -> int | None:
        """The unit price the page showed for the product chosen, in cents; None when it
        sent none (a client that drew no form: it is priced as the API prices)."""
        return (
            self._prices_sent().get(self.product.data)
            if isinstance(self.product.data, int)
            else None
        )

    def keep_the_product_sent(self) -> None:
        """No catalogue to check against (this process has read none, and PostgreSQL is
        away): the product sent stays chosen, for the transaction to read and decide,
        rather than refused and dropped from the page drawn again."""
        if isinstance(self.product.data, int):
            self.product.choices = [(self.product.data, PRODUCT_NOT_SHOWN)]
            self.products = {self.product.data: None}
            self.prices = {}

    def validate(self, extra_validators: Any = None) -> bool:
        """The fields, then whether this repeats an order placed minutes ago unconfirmed:
        asked here so the form's token stays unspent (a double click is asked again)."""
        if not super().validate(extra_validators):
            return False
        if self.same_order_check is not None:
            self.same_order = self.same_order_check(self)
            if self.same_order is not None:
                self.same_again.errors = [self.same_order.question]
                return False
        return True

    def details(self, payment_method: str | None = None) -> OrderDetails:
        """The validated order, as :func:`webapp.shop.placing.new_order` takes it."""
        return OrderDetails(
            self.product.data,
            self.quantity.data,
            self.name.data,
            self.email.data,
            self.address.data,
            payment_method,
            self.price_shown(),
        )

    def validate_product(self, field: SelectField) -> None:
        if field.data not in self.products:
            raise ValidationError("Choose one of the products on sale.")

    def validate_name(self, field: StringField) -> None:
        _printable(field)

    def validate_address(self, field: TextAreaField) -> None:
        _printable(field, allow="\r\n")


class CardOrderForm(OrderForm):
    """The order form when the checkout charges a card: the number is turned into the
    provider's token during validation, before the form token is spent, and only the
    token (``payment_method``) goes further. A page drawn again carries that token, not
    the number, so a resubmit of it needs no number typed again.

    The provider is asked last, only when every other field is valid, the form token
    can still take effect (``token_is_live``: a spent or expired token's submit is
    answered as the repeat it is, by the library, with no call) and the session may
    still ask (``may_ask``: a bounded count per browser session,
    webapp/payments/card_checks.py): each call is an outbound request from the shop's
    own key, and a flood of them looks like card testing."""

    card = StringField("Card number", filters=[lambda v: re.sub(r"[\s-]", "", v or "")])
    payment_method = HiddenField()

    def __init__(
        self,
        products: list[Product],
        client: ProviderClient,
        *,
        test_cards: bool = False,
        token_is_live: Callable[[], bool] = lambda: True,
        may_ask: Callable[[], bool] = lambda: True,
        **kwargs: object,
    ) -> None:
        super().__init__(products, **kwargs)
        self.client = client
        self.token_is_live, self.may_ask = token_is_live, may_ask
        self.card.description = SAMPLE_CARDS if test_cards else ""
        #: The last four digits of the card the token stands for, once checked.
        self.card_last4: str | None = None

    def validate_card(self, field: StringField) -> None:
        """What can be told without the provider: a number's shape, or none at all."""
        if field.data:
            if not field.data.isdigit() or not 12 <= len(field.data) <= 19:
                raise ValidationError(CARD_SHAPE)
        elif not PAYMENT_METHOD.fullmatch(self.payment_method.data or ""):
            self.payment_method.data = ""
            raise ValidationError(CARD_MISSING)

    def validate(self, extra_validators: Any = None) -> bool:
        """The other fields first (and the same-order question): a form that would come
        back anyway never sends its card to the provider."""
        if not super().validate(extra_validators):
            return False
        if not self.token_is_live():
            # Spent or expired: the library answers the submit as a repeat (its order, or
            # the form with a fresh token); a check now could change nothing.
            return False
        try:
            self.ask_provider()
        except ValidationError as error:
            self.card.errors = [*self.card.errors, str(error)]
            return False
        return True

    def ask_provider(self) -> None:
        """Turn the number into the provider's token (or check the one kept)."""
        if not self.may_ask():
            raise ValidationError(CARD_CHECKS_SPENT)
        kept = self.payment_method.data or ""
        try:
            if self.card.data:
                found: PaymentMethod | None = self.client.create_payment_method(self.card.data)
            else:
                found = self.client.payment_method(kept)
        except CardRefused:
            raise ValidationError(CARD_INVALID) from None
        except ProviderError:
            raise ValidationError(CARD_UNCHECKED) from None
        if found is None:
            self.payment_method.data = ""
            raise ValidationError(CARD_MISSING)
        self.payment_method.data, self.card_last4 = found.id, found.last4


def _printable(field: StringField, allow: str = "") -> None:
    if not field.data:
        raise ValidationError("This field is required.")
    if has_control_chars(field.data, allow):
        raise ValidationError("Remove the control characters from this field.")
