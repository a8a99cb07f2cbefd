"""Refund requests as rows (a transactional outbox) and reservations on orders.

The refund submit inserts a ``refund_requests`` row and adds its amount to
``orders.reserved_cents`` in its one transaction; a relay publishes the rows to
the stream; the worker moves the amount from reserved to refunded when it
applies one, or releases it when it gives up on it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "orders", sa.Column("reserved_cents", sa.Integer, nullable=False, server_default="0")
    )
    # What is refunded plus what is requested and not yet applied never exceeds
    # what was paid: a request over what is left fails here, whatever the form said.
    op.create_check_constraint(
        "orders_reserved_within_paid",
        "orders",
        "reserved_cents >= 0 AND refunded_cents + reserved_cents <= paid_cents",
    )
    op.create_table(
        "refund_requests",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("idempotency_key", sa.String(43), nullable=False),
        sa.Column("order_id", sa.BigInteger, sa.ForeignKey("orders.id"), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="requested"),
        sa.Column("reason", sa.Text),
        sa.Column("published_at", sa.DateTime(timezone=True)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("amount_cents > 0", name="refund_requests_amount_positive"),
        sa.CheckConstraint(
            "status IN ('requested', 'applied', 'failed')", name="refund_requests_status_known"
        ),
        # The form token's digest: a resubmit of the same form finds this row.
        sa.UniqueConstraint("idempotency_key", name="refund_requests_key_unique"),
    )
    op.create_index("refund_requests_order_id", "refund_requests", ["order_id"])
    # The relay's queue: small, because rows leave it as soon as they are published.
    op.create_index(
        "refund_requests_unpublished",
        "refund_requests",
        ["id"],
        postgresql_where=sa.text("published_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("refund_requests")
    op.drop_constraint("orders_reserved_within_paid", "orders")
    op.drop_column("orders", "reserved_cents")
