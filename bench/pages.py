"""The shop's order form as the benchmark's variants draw and place it, without the
token layer: the same form, template, INSERT and commit as the real view."""

from __future__ import annotations

import secrets

from flask import redirect, render_template, url_for
from markupsafe import Markup

from webapp.extensions import submit_once
from webapp.orders.views import order_form
from webapp.shop.placing import OrderDetails, new_order

#: Stands in for a token in the hidden input, so the page is the same size.
NO_TOKEN = "-" * 43


class FixedToken:
    """The template's ``submit_once`` for a variant that makes its own token: the hidden
    input carries ``token``; the page answers no submit of the library's."""

    message = reason = existing_url = form = None

    def __init__(self, token: str, *, reason: str | None = None) -> None:
        self._token, self.reason = token, reason

    def token(self, endpoint: str, **values: object) -> str:
        return self._token

    def input(self, endpoint: str, **values: object) -> Markup:
        return Markup('<input type="hidden" name="form_token" value="%s">') % self._token

    def answered(self, endpoint: str, **values: object) -> None:
        return None


def form_page(form_token: str, form=None, status: int = 200):
    """The order form, as the real view renders it, with ``form_token`` in it."""
    form = form if form is not None else order_form()
    shown = FixedToken(form_token, reason="invalid" if status == 422 else None)
    return render_template("orders/new.html", form=form, submit_once=shown), status


def place(form, digest: str):
    """INSERT the order (``digest`` in the UNIQUE column), COMMIT; the order."""
    db = submit_once.session
    order = new_order(
        db,
        OrderDetails(
            form.product.data,
            form.quantity.data,
            form.name.data,
            form.email.data,
            form.address.data,
        ),
    )
    order.submission_digest, order.submission_step = digest, None
    db.commit()
    return order


def validate_and_place(form_token: str):
    """Validate, INSERT (a random value in the UNIQUE column), COMMIT, 303 to the
    confirmation page; the form again (422) when invalid."""
    form = order_form()
    if not form.validate():
        return form_page(form_token, form, 422)
    placed = place(form, secrets.token_urlsafe(32)[:43])
    return redirect(url_for("orders.show", public_id=placed.public_id), 303)
