"""API clients and hashed keys, idempotency keys on orders, payment events.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("client_id", sa.Integer, sa.ForeignKey("api_clients.id"), nullable=False),
        # SHA-256 of the key: the key itself is shown once and never stored.
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.add_column(
        "orders",
        sa.Column("api_client_id", sa.Integer, sa.ForeignKey("api_clients.id"), nullable=True),
    )
    op.add_column("orders", sa.Column("idempotency_key", sa.String(255), nullable=True))
    op.add_column("orders", sa.Column("request_fingerprint", sa.String(64), nullable=True))
    op.add_column("orders", sa.Column("api_response", JSONB, nullable=True))
    # The last line of defence for the API: whatever Redis forgets, one client's
    # key names at most one order.
    op.create_unique_constraint(
        "orders_api_client_idempotency_key", "orders", ["api_client_id", "idempotency_key"]
    )
    op.create_check_constraint(
        "orders_api_fields_together",
        "orders",
        "(api_client_id IS NULL) = (idempotency_key IS NULL)"
        " AND (idempotency_key IS NULL) = (request_fingerprint IS NULL)",
    )
    op.create_table(
        "payment_events",
        sa.Column("id", sa.BigInteger, primary_key=True),
        # UNIQUE, written in the transaction of the event's effect: an event
        # takes effect once even when Redis forgets that it was seen.
        sa.Column("event_id", sa.String(255), nullable=False, unique=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("order_id", sa.BigInteger, sa.ForeignKey("orders.id"), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("payment_events")
    op.drop_constraint("orders_api_fields_together", "orders")
    op.drop_constraint("orders_api_client_idempotency_key", "orders")
    for column in ("api_response", "request_fingerprint", "idempotency_key", "api_client_id"):
        op.drop_column("orders", column)
    op.drop_table("api_keys")
    op.drop_table("api_clients")
