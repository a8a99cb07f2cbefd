"""The order form as a request gets it: over the catalogue on sale, with the card field
when the checkout charges one; for placing an order (views.py) and for updating one
(amend_views.py)."""

from __future__ import annotations

from contextlib import suppress

from flask import abort, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from ..extensions import submit_once
from ..payments import provider
from ..payments.card_checks import may_check_card
from .catalogue import active_products, last_known_products
from .forms import CardOrderForm, OrderForm
from .same_order import shopper

__all__ = ["FINGERPRINTED", "order_form"]

#: The fields that make an order what it is: a resubmit of one rendering with any of
#: them changed is told so, not landed on the order the first submit placed.
FINGERPRINTED = ("product", "quantity", "name", "email", "address")


def order_form(*, card: bool = True) -> OrderForm:
    """The order form over the catalogue on sale (as last read, while PostgreSQL is away:
    the submit reads the product again inside its transaction); with ``card``, the card
    field when the checkout charges one."""
    if request.method == "POST":
        reject_repeated_fields()
    db = submit_once.session
    # no catalogue at all: none read in this process, and none now
    unknown = False
    try:
        products = active_products(db)
    except SQLAlchemyError:
        if request.method != "POST":
            # a page with nothing to sell: the 503 page
            raise
        # The failed read left this request's session in an aborted transaction, the
        # one the submit runs in next: end it, so the submit starts clean.
        with suppress(SQLAlchemyError):
            db.rollback()
        products = last_known_products()
        unknown = not products
    # The catalogue read is cached for every request of the process: its products must
    # not stay in this request's session, whose ROLLBACK would expire them under the
    # other requests (and whose loads they would then run from other threads).
    for product in products:
        if product in db:
            db.expunge(product)
    client = provider() if card else None
    form = (
        OrderForm(products)
        if client is None
        else CardOrderForm(
            products,
            client,
            test_cards=current_app.config["APP_ENV"] != "production",
            token_is_live=submit_once.token_is_live,
            may_ask=lambda: may_check_card(shopper(create=True) or ""),
        )
    )
    if unknown:
        form.keep_the_product_sent()
    return form


def reject_repeated_fields() -> None:
    """400 if a field was sent more than once: a browser never does, and which value
    should win would be a guess."""
    repeated = sorted(name for name, values in request.form.lists() if len(values) > 1)
    if repeated:
        abort(
            400,
            f"The field {repeated[0]!r} was sent more than once. Open the form again and "
            "submit it from there.",
        )
