"""Refund records: one row per refund applied, keyed by its idempotency key.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "refund_records",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("idempotency_key", sa.String(43), nullable=False),
        sa.Column("order_id", sa.BigInteger, sa.ForeignKey("orders.id"), nullable=False),
        sa.Column("amount_cents", sa.Integer, nullable=False),
        sa.Column("message_id", sa.String(40), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("amount_cents > 0", name="refund_records_amount_positive"),
        # A message delivered twice (redelivery, a duplicate, two workers racing)
        # inserts once; the second insert fails here and is acked as done.
        sa.UniqueConstraint("idempotency_key", name="refund_records_key_unique"),
    )
    op.create_index("refund_records_order_id", "refund_records", ["order_id"])


def downgrade() -> None:
    op.drop_table("refund_records")
