"""A payment reference apart from the order's key.

orders.payment_reference: what the payment provider is given for an order and
what its events name the order by (UNIQUE). Until now events named the order by
the key of its private link, so anyone who saw provider-side data could open,
cancel or refund the order; the reference opens nothing. Every existing order
gets its own here, and the API responses stored for retries get it too (so a
replay says what a new response says). Events that name an order by its key
are refused as naming no order from this release on: tell the provider the new
references (``SELECT order_number, payment_reference FROM orders``) for orders
still waiting to be paid.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# The column's default, so rows inserted in SQL (and every existing row, as the
# column is added) get one too. The app draws its own from ``secrets``; here
# gen_random_uuid() (PostgreSQL 13+, 122 random bits from a strong source) gives
# the same shape: "pay_" and 32 hex digits. Copied, not imported, as in 0006.
NEW_PAYMENT_REFERENCE = """
CREATE FUNCTION new_payment_reference() RETURNS varchar(36) LANGUAGE sql VOLATILE AS $$
  SELECT 'pay_' || replace(gen_random_uuid()::text, '-', '')
$$"""


def upgrade() -> None:
    op.execute(NEW_PAYMENT_REFERENCE)
    # A volatile default is evaluated per row: every existing order gets its own.
    op.add_column(
        "orders",
        sa.Column(
            "payment_reference",
            sa.String(36),
            nullable=False,
            server_default=sa.text("new_payment_reference()"),
        ),
    )
    op.create_unique_constraint("orders_payment_reference_key", "orders", ["payment_reference"])
    op.execute(
        "UPDATE orders SET api_response = api_response"
        " || jsonb_build_object('payment_reference', payment_reference)"
        " WHERE api_response IS NOT NULL"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE orders SET api_response = api_response - 'payment_reference'"
        " WHERE api_response IS NOT NULL"
    )
    op.drop_constraint("orders_payment_reference_key", "orders")
    op.drop_column("orders", "payment_reference")
    op.execute("DROP FUNCTION new_payment_reference()")
