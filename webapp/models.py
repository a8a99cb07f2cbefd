"""The shop's tables (SQLAlchemy 2.0 typed models). Alembic owns the schema."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

ORDER_STATUSES = ("placed", "paid", "shipped", "cancelled", "refunded")


class Base(DeclarativeBase):
    pass


def new_public_id() -> str:
    """128 random bits: the only handle on an order that leaves the server."""
    return secrets.token_urlsafe(16)


class Product(Base):
    __tablename__ = "products"

    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(120))
    description: Mapped[str] = mapped_column(Text, default="")
    price_cents: Mapped[int] = mapped_column(Integer, CheckConstraint("price_cents >= 0"))
    active: Mapped[bool] = mapped_column(Boolean, default=True)


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (
        CheckConstraint("quantity BETWEEN 1 AND 99", name="orders_quantity_range"),
        CheckConstraint(f"status IN {ORDER_STATUSES!r}", name="orders_status_known"),
        CheckConstraint("paid_cents >= 0", name="orders_paid_cents_positive"),
        CheckConstraint("refunded_cents >= 0 AND refunded_cents <= paid_cents",
                        name="orders_refund_within_paid"),
        UniqueConstraint("api_client_id", "idempotency_key",
                         name="orders_api_client_idempotency_key"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    public_id: Mapped[str] = mapped_column(String(22), unique=True, default=new_public_id)
    # Digest of the form token (bound to session and form). UNIQUE: the last line
    # of defence when Redis gives back a token it had already handed out.
    form_token_digest: Mapped[str] = mapped_column(String(43), unique=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price_cents: Mapped[int] = mapped_column(Integer)
    customer_name: Mapped[str] = mapped_column(String(100))
    email: Mapped[str] = mapped_column(String(254))
    shipping_address: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(16), default="placed")
    paid_cents: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    refunded_cents: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Orders placed through the JSON API (migration 0003): the caller's key,
    # UNIQUE per client, and the response replayed to a retry with that key.
    api_client_id: Mapped[int | None] = mapped_column(ForeignKey("api_clients.id"))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    request_fingerprint: Mapped[str | None] = mapped_column(String(64))
    api_response: Mapped[dict | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )

    product: Mapped[Product] = relationship(lazy="joined")

    @property
    def total_cents(self) -> int:
        return self.unit_price_cents * self.quantity
