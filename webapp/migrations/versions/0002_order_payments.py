"""Paid and refunded amounts on orders, for the state machine.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("orders", sa.Column("paid_cents", sa.Integer, nullable=False, server_default="0"))
    op.add_column(
        "orders", sa.Column("refunded_cents", sa.Integer, nullable=False, server_default="0")
    )
    op.create_check_constraint("orders_paid_cents_positive", "orders", "paid_cents >= 0")
    # A refund can never exceed what was paid, whoever applies it and however often.
    op.create_check_constraint(
        "orders_refund_within_paid",
        "orders",
        "refunded_cents >= 0 AND refunded_cents <= paid_cents",
    )


def downgrade() -> None:
    op.drop_constraint("orders_refund_within_paid", "orders")
    op.drop_constraint("orders_paid_cents_positive", "orders")
    op.drop_column("orders", "refunded_cents")
    op.drop_column("orders", "paid_cents")
