"""A checkout whose submit charges a card, written as a user of the library writes one: the
order is the row, the charge the step outside the database (``then=``), and the card
provider lives in the test (:class:`Provider`), so that the test counts every call and
its key, and makes the provider slow, fail or decline."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, render_template
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import IntegerField, StringField, ValidationError
from wtforms.validators import Email, InputRequired, NumberRange

from flask_submit_once import Refused, SubmissionMixin, SubmitOnce

submit_once = SubmitOnce()
csrf = CSRFProtect()


class Base(DeclarativeBase):
    pass


class Order(SubmissionMixin, Base):
    __tablename__ = "checkout_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    cents: Mapped[int]
    charge_id: Mapped[str | None] = mapped_column(String(40), default=None)


class Declined(Exception):
    """The provider declined the card."""


class Provider:
    """A card provider's "create and confirm a charge", as the step calls it: one charge
    per idempotency key (the same key again gets the same charge back), every call
    counted by key. ``mode``: ``"ok"``, ``"fail"`` (the connection drops before it
    charges: ``ConnectionError``) or ``"decline"``. After :meth:`hold`, the next call
    waits until :meth:`release` (or until ``until()`` is true) before it answers;
    ``after()``, when set, runs once a charge is made, before its answer is back."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.after: Callable[[], None] | None = None
        self.calls: Counter[str] = Counter()
        self.keys: list[str] = []
        self.charges: dict[str, str] = {}
        self.changed = threading.Condition()
        self.entered, self.released = threading.Event(), threading.Event()
        self.released.set()
        self.until: Callable[[], bool] | None = None
        #: Cards checked (:meth:`check_card`), by number.
        self.checks: Counter[str] = Counter()

    def check_card(self, number: str) -> None:
        """Check a card before anything is charged: a call to the provider, as costly as
        a charge to the shop that makes it."""
        with self.changed:
            self.checks[number] += 1

    def charge(self, key: str, cents: int) -> str:
        with self.changed:
            self.calls[key] += 1
            self.keys.append(key)
            held = not self.entered.is_set()
            self.entered.set()
            self.changed.notify_all()
            if held:
                assert self.changed.wait_for(
                    lambda: self.released.is_set() or bool(self.until and self.until()), 30
                ), "the held provider was never released"
            if self.mode == "fail":
                raise ConnectionError("the provider dropped the connection")
            if self.mode == "decline":
                raise Declined("insufficient funds")
            charge = self.charges.setdefault(key, f"ch_{len(self.charges) + 1}")
        if self.after is not None:
            self.after()
        return charge

    def hold(self, until: Callable[[], bool] | None = None) -> None:
        """Hold the next call (``entered`` says it came) until :meth:`release`, or until
        ``until()`` (looked at again by :meth:`poke`)."""
        with self.changed:
            self.entered.clear()
            self.released.clear()
            self.until = until

    def release(self) -> None:
        with self.changed:
            self.released.set()
            self.changed.notify_all()

    def poke(self) -> None:
        with self.changed:
            self.changed.notify_all()


class CheckoutForm(FlaskForm):
    email = StringField("Email", validators=[InputRequired(), Email(check_deliverability=False)])
    cents = IntegerField("Amount", validators=[NumberRange(1, 100_000)])
    #: Optional: a card sent is checked at the provider while the form is validated.
    card = StringField("Card")

    def validate_email(self, field: StringField) -> None:
        """One order per address, unless its card was declined: a rule that stops holding
        once this submit's own order exists."""
        if submit_once.session.scalar(
            select(Order.id).where(
                Order.email == field.data, Order.submission_step.is_distinct_from("refused")
            )
        ):
            raise ValidationError("This address has an order already.")

    def validate_card(self, field: StringField) -> None:
        """A call to the provider, worth making only for a submit that can still take
        effect: a spent token's submit is answered as the repeat it is."""
        if not field.data:
            return
        if not submit_once.token_is_live():
            raise ValidationError("Not checked: this form was already sent.")
        current_app.extensions["card_provider"].check_card(field.data)


PAGE = """<!doctype html><html><title>Checkout</title>
<form id="checkout" method="post" action="{{ url_for('checkout') }}">
  {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("checkout") }}
  <input name="email" value="{{ form.email.data or '' if form else '' }}">
  <input name="cents" value="{{ form.cents.raw_data[0] if form and form.cents.raw_data else '' }}">
  <button>Pay</button>
</form></html>"""


def create_app(sessions: sessionmaker[Session], provider: Provider, **config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"SECRET_KEY": "checkout", "TESTING": True, **config})
    app.jinja_loader = DictLoader({"checkout.html": PAGE})
    submit_once.init_app(app, sessions=sessions)
    csrf.init_app(app)
    app.extensions["card_provider"] = provider

    def charge(db: Session, order: Order, key: str) -> None:
        try:
            order.charge_id = provider.charge(key, order.cents)
        except Declined as declined:
            raise Refused(f"Your card was declined ({declined}).") from None

    @app.get("/checkout")
    def checkout_page() -> str:
        return render_template("checkout.html", form=None)

    @app.post("/checkout/pay")
    @submit_once.form(
        CheckoutForm, model=Order, template="checkout.html", done="order", then=charge
    )
    def checkout(form: CheckoutForm, db: Session) -> Order:
        return Order(email=form.email.data, cents=form.cents.data)

    @app.get("/orders/<int:id>")
    def order(id: int) -> dict[str, Any]:
        with sessions() as db:
            row = db.get(Order, id)
            assert row is not None
            return {"id": id, "charge_id": row.charge_id, "step": row.submission_step}

    return app
