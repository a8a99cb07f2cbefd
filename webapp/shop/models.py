"""Every table of the shop, as SQLAlchemy 2.0 typed models. Alembic owns the
schema (webapp/migrations); these match it column for column, and a test
compares the two."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, synonym

from flask_submit_once import SubmissionMixin, VersionedMixin

from .order_rules import (
    ADDRESS_MAX,
    CURRENCY,
    EMAIL_MAX,
    NAME_MAX,
    ORDER_NUMBER_LENGTH,
    PRODUCT_NAME_MAX,
    PUBLIC_ID_LENGTH,
    QUANTITY_MAX,
    QUANTITY_MIN,
    SKU_MAX,
    new_order_number,
    new_public_id,
)

__all__ = [
    "CHECKOUT_CHARGE",
    "KEPT_REFUNDABLE",
    "OPERATOR_MAX",
    "ORDER_STATUSES",
    "PAYMENT_PROBLEMS",
    "PAYMENT_REFERENCE_LENGTH",
    "PHOTO_NAME_MAX",
    "PROVIDER_ID_MAX",
    "REFUND_PHOTO_TYPES",
    "ApiClient",
    "ApiKey",
    "Base",
    "Order",
    "OrderAmendment",
    "PaymentEvent",
    "Product",
    "RefundPhoto",
    "RefundRecord",
    "RefundRequest",
    "new_payment_reference",
    "new_public_id",
]

#: ``charging`` (migration 0014): the checkout's card charge is under way (or was
#: interrupted: a repeat of the submit or the sweeper finishes it); ``declined``: the
#: bank declined it, nothing was charged, nothing ships.
ORDER_STATUSES = ("placed", "charging", "paid", "shipped", "cancelled", "refunded", "declined")
#: Why a payment was recorded but did not pay for its order (payment_events.problem).
#: The first three keep money with no order to show for it (payments reconcile lists
#: them); the next two add it to the order's paid_cents, where it can be refunded; the
#: last (migration 0014) is the event of the checkout's own charge, counted by the order's
#: charge_id, not again by its event.
PAYMENT_PROBLEMS = (
    "amount_mismatch",
    "currency_mismatch",
    "order_closed",
    "after_cancel",
    "extra_payment",
    "checkout_charge",
)
#: Problems whose money is added to the order's paid_cents, so it can be refunded.
KEPT_REFUNDABLE = ("after_cancel", "extra_payment")
#: The problem of an event that announces the checkout's own charge (counted once, there).
CHECKOUT_CHARGE = "checkout_charge"
#: ``pay_`` and 32 hex digits (128 random bits): what :func:`new_payment_reference` makes.
PAYMENT_REFERENCE_LENGTH = 36


def new_payment_reference() -> str:
    """What the payment provider is given for an order, and what its events name it
    by. Random, so nothing leads from it to the order's key or number, and it opens
    nothing: it is looked up only by the webhook. The prefix tells it apart from a key."""
    return f"pay_{secrets.token_hex(16)}"


#: The longest provider id stored (a payment method's ``pm_…``, a charge's ``ch_…``, a
#: decline code).
PROVIDER_ID_MAX = 64

#: The longest operator name stored (migration 0013: who shipped an order, changed a
#: product, reviewed or requeued a refund request; see webapp/shop/operators.py).
OPERATOR_MAX = 100

#: The length of a submission digest (SHA-256, URL-safe base64 without padding).
DIGEST_LENGTH = 43


class Base(DeclarativeBase):
    pass


class Product(Base):
    __tablename__ = "products"

    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(String(SKU_MAX), unique=True)
    name: Mapped[str] = mapped_column(String(PRODUCT_NAME_MAX))
    description: Mapped[str] = mapped_column(Text, default="")
    price_cents: Mapped[int] = mapped_column(Integer, CheckConstraint("price_cents >= 0"))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Migration 0013: who last changed it with a products command, and when.
    changed_by: Mapped[str | None] = mapped_column(String(OPERATOR_MAX))
    changed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Order(SubmissionMixin, VersionedMixin, Base):
    __tablename__ = "orders"
    __table_args__ = (
        CheckConstraint(
            f"quantity BETWEEN {QUANTITY_MIN} AND {QUANTITY_MAX}", name="orders_quantity_range"
        ),
        CheckConstraint(f"status IN {ORDER_STATUSES!r}", name="orders_status_known"),
        CheckConstraint("paid_cents >= 0", name="orders_paid_cents_positive"),
        CheckConstraint(
            "refunded_cents >= 0 AND refunded_cents <= paid_cents", name="orders_refund_within_paid"
        ),
        # Migration 0007: requested, not yet applied refunds are reserved.
        CheckConstraint(
            "reserved_cents >= 0 AND refunded_cents + reserved_cents <= paid_cents",
            name="orders_reserved_within_paid",
        ),
        UniqueConstraint(
            "api_client_id", "idempotency_key", name="orders_api_client_idempotency_key"
        ),
        # Migration 0014: a charge pays one order; an order being charged has a card.
        UniqueConstraint("charge_id", name="orders_charge_id_key"),
        CheckConstraint(
            "status <> 'charging' OR payment_method IS NOT NULL", name="orders_charging_has_card"
        ),
        Index(
            "orders_placed_in_session",
            "placed_in_session",
            "created_at",
            postgresql_where=text("placed_in_session IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    # The private link's key (128 random bits): never shown as a number, logged or a label.
    public_id: Mapped[str] = mapped_column(
        String(PUBLIC_ID_LENGTH), unique=True, default=new_public_id
    )
    # What people quote (migration 0006); it opens nothing by itself.
    order_number: Mapped[str] = mapped_column(
        String(ORDER_NUMBER_LENGTH),
        unique=True,
        default=new_order_number,
        server_default=text("new_order_number()"),
    )
    # What the payment provider is given and its events name the order by
    # (migration 0011). Provider-side data (its staff, dashboard, delivery logs)
    # holds it, so it opens nothing: no page or API call looks an order up by it.
    payment_reference: Mapped[str] = mapped_column(
        String(PAYMENT_REFERENCE_LENGTH),
        unique=True,
        server_default=text("new_payment_reference()"),
    )
    currency: Mapped[str] = mapped_column(String(3), default=CURRENCY, server_default=CURRENCY)
    # From SubmissionMixin: submission_digest, the digest of what made this order once
    # (a form token, bound to session and form, or an API client's Idempotency-Key),
    # UNIQUE, the last line of defence when Redis gives back a token or key it had
    # already handed out; and submission_fingerprint (migration 0008), what the form or
    # the API request was, so that a resubmit with other fields is told, not landed here.
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price_cents: Mapped[int] = mapped_column(Integer)
    customer_name: Mapped[str] = mapped_column(String(NAME_MAX))
    email: Mapped[str] = mapped_column(String(EMAIL_MAX))
    shipping_address: Mapped[str] = mapped_column(String(ADDRESS_MAX))
    status: Mapped[str] = mapped_column(String(16), default="placed")
    paid_cents: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    refunded_cents: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The sum of this order's refund requests not yet applied (nor failed).
    reserved_cents: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Orders placed through the JSON API (migration 0003): the caller's key,
    # UNIQUE per client, and the response replayed to a retry with that key.
    api_client_id: Mapped[int | None] = mapped_column(ForeignKey("api_clients.id"))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    api_response: Mapped[dict | None] = mapped_column(JSONB)
    # Migration 0013: the operator who ran orders ship on it.
    shipped_by: Mapped[str | None] = mapped_column(String(OPERATOR_MAX))
    # Migration 0014, the checkout's card charge (webapp/payments/checkout.py): the
    # provider's token for the card (never its number), the charge that paid the order
    # or was declined, and the bank's reason for a decline.
    payment_method: Mapped[str | None] = mapped_column(String(PROVIDER_ID_MAX))
    charge_id: Mapped[str | None] = mapped_column(String(PROVIDER_ID_MAX))
    decline_code: Mapped[str | None] = mapped_column(String(PROVIDER_ID_MAX))
    # Migration 0015: a digest of the browser session that placed it through the form
    # (webapp/orders/same_order.py asks before the same order is placed twice from it).
    placed_in_session: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH))
    # From VersionedMixin (migration 0016): version, one more with every change the ORM
    # writes, so that an update of its details from a page drawn before another landed
    # (a second tab) is told, not written over (webapp/orders/amend_views.py).
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )

    product: Mapped[Product] = relationship(lazy="joined")

    @property
    def total_cents(self) -> int:
        return self.unit_price_cents * self.quantity


class OrderAmendment(SubmissionMixin, Base):
    """One "Update order N with these details" that took effect (migration 0015), made
    once per form token (SubmissionMixin's digest, UNIQUE): what it changed, field by
    field, as ``{field: [before, after]}`` (webapp/orders/amending.py)."""

    __tablename__ = "order_amendments"
    __table_args__ = (Index("order_amendments_order_id", "order_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    order_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("orders.id"))
    changes: Mapped[dict] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    order: Mapped[Order] = relationship(lazy="joined")


class ApiClient(Base):
    """A caller of the JSON API; it may hold several keys."""

    __tablename__ = "api_clients"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ApiKey(Base):
    """The SHA-256 of a bearer key: the key itself is shown once and never stored.
    Migration 0010: its first characters (what ``api-keys list`` shows and
    ``api-keys revoke --key`` takes; none for keys made before), an optional expiry,
    when it was revoked, and when it was last used (to the minute)."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("api_clients.id"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    key_prefix: Mapped[str | None] = mapped_column(String(16))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class PaymentEvent(Base):
    """A payment provider's event, recorded in the transaction of its effect:
    the UNIQUE event id makes it take effect once even when Redis forgets it."""

    __tablename__ = "payment_events"
    __table_args__ = (
        CheckConstraint(
            f"problem IS NULL OR problem IN {PAYMENT_PROBLEMS!r}",
            name="payment_events_problem_known",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(255), unique=True)
    type: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("orders.id"))
    amount_cents: Mapped[int] = mapped_column(Integer)
    # Migration 0006: the event's currency, and why it did not pay for its order
    # (one of PAYMENT_PROBLEMS), NULL when it did just that.
    currency: Mapped[str] = mapped_column(String(3), default=CURRENCY, server_default=CURRENCY)
    problem: Mapped[str | None] = mapped_column(String(32))
    received_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class RefundRecord(Base):
    """One refund applied (migration 0004). A message delivered twice inserts
    once: the second insert fails on the UNIQUE key and is acked as done."""

    __tablename__ = "refund_records"
    __table_args__ = (
        CheckConstraint("amount_cents > 0", name="refund_records_amount_positive"),
        UniqueConstraint("idempotency_key", name="refund_records_key_unique"),
        Index("refund_records_order_id", "order_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(DIGEST_LENGTH))
    order_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("orders.id"))
    amount_cents: Mapped[int] = mapped_column(Integer)
    # The stream message's id, or where else the refund came from ("webhook").
    message_id: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


#: ``review`` (migration 0009): on a shipped order, waiting for an operator, who
#: approves it (``requested``) or rejects it (``rejected``, with the reason).
REFUND_REQUEST_STATUSES = ("requested", "review", "applied", "failed", "rejected")


class RefundRequest(SubmissionMixin, Base):
    """A refund the customer asked for (migration 0007): the outbox row the
    relay publishes to the stream, and what the order page shows. Its amount is
    reserved on the order from the submit until the worker applies it
    (``applied``), gives up on it (``failed``, with the reason in plain words)
    or an operator rejects it (``rejected``). The worker applies only what this
    row says; a stream message names it by ``id``. ``reason`` says why it failed
    or was rejected; an approved one's is ``refunds.requests.APPROVED``, which
    lets the worker apply it on a shipped order."""

    __tablename__ = "refund_requests"
    __table_args__ = (
        CheckConstraint("amount_cents > 0", name="refund_requests_amount_positive"),
        CheckConstraint(
            f"status IN {REFUND_REQUEST_STATUSES!r}", name="refund_requests_status_known"
        ),
        UniqueConstraint("idempotency_key", name="refund_requests_key_unique"),
        Index("refund_requests_order_id", "order_id"),
        # Migration 0009: the relay's queue, requested rows only.
        Index(
            "refund_requests_unpublished",
            "id",
            postgresql_where=text("published_at IS NULL AND status = 'requested'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    # SubmissionMixin's digest, in the column the worker and its stream messages know
    # as the request's idempotency key (UNIQUE above); submission_fingerprint (migration
    # 0012) is the amount the form asked for.
    submission_digest: Mapped[str] = mapped_column("idempotency_key", String(DIGEST_LENGTH))
    idempotency_key: Mapped[str] = synonym("submission_digest")
    order_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("orders.id"))
    amount_cents: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="requested", server_default="requested")
    reason: Mapped[str | None] = mapped_column(Text)
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Migration 0013: the operator who approved or rejected it, and who requeued it.
    reviewed_by: Mapped[str | None] = mapped_column(String(OPERATOR_MAX))
    requeued_by: Mapped[str | None] = mapped_column(String(OPERATOR_MAX))


#: What a refund photo may be (migration 0018): the type its bytes were recognised as
#: (webapp/refunds/photos.py), never what the browser said. No SVG: it can carry script.
REFUND_PHOTO_TYPES = ("image/jpeg", "image/png", "image/webp")
#: The longest file name kept with a photo (made safe first: the operator's terminal shows it).
PHOTO_NAME_MAX = 255


class RefundPhoto(Base):
    """The photo a customer attached to a refund request (migration 0018), written in
    the request's own transaction: at most one a request, as the request is one a
    submit. Only the operator reviewing the request sees it (``flask --app webapp
    refunds photo``); no page serves it."""

    __tablename__ = "refund_photos"
    __table_args__ = (
        CheckConstraint(f"content_type IN {REFUND_PHOTO_TYPES!r}", name="refund_photos_type_known"),
        CheckConstraint("octet_length(data) > 0", name="refund_photos_not_empty"),
    )

    refund_request_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("refund_requests.id", ondelete="CASCADE"), primary_key=True
    )
    content_type: Mapped[str] = mapped_column(String(16))
    filename: Mapped[str] = mapped_column(String(PHOTO_NAME_MAX))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
