"""Order numbers apart from the private key, currencies, and payment problems.

orders.order_number: a short number people quote (UNIQUE); existing orders get
one here. orders.currency and payment_events.currency: ISO 4217 codes (EUR for
every existing row). payment_events.problem: why a recorded payment did not pay
for its order (NULL when it did).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Copied, not imported: a migration must keep doing what it did when the app changes.
ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
# The column's default, so rows inserted in SQL (and every existing row, as the
# column is added) get a number too. The app sets its own from ``secrets``; a
# number is not a secret, so random() is good enough here.
NEW_ORDER_NUMBER = f"""
CREATE FUNCTION new_order_number() RETURNS varchar(10) LANGUAGE sql VOLATILE AS $$
  SELECT string_agg(substr('{ALPHABET}', 1 + floor(random() * {len(ALPHABET)})::int, 1), '')
    FROM generate_series(1, 10)
$$"""
PROBLEMS = ("amount_mismatch", "currency_mismatch", "order_closed", "after_cancel", "extra_payment")


def upgrade() -> None:
    op.execute(NEW_ORDER_NUMBER)
    # A volatile default is evaluated per row: every existing order gets its own number.
    op.add_column(
        "orders",
        sa.Column(
            "order_number",
            sa.String(10),
            nullable=False,
            server_default=sa.text("new_order_number()"),
        ),
    )
    # Two existing orders drawing the same number (about 1 in 10^14 a pair): draw again.
    op.execute(
        "UPDATE orders SET order_number = new_order_number() WHERE id IN ("
        "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY order_number) AS n "
        "FROM orders) numbered WHERE n > 1)"
    )
    op.create_unique_constraint("orders_order_number_key", "orders", ["order_number"])
    op.add_column(
        "orders", sa.Column("currency", sa.String(3), nullable=False, server_default="EUR")
    )
    op.add_column(
        "payment_events", sa.Column("currency", sa.String(3), nullable=False, server_default="EUR")
    )
    op.add_column("payment_events", sa.Column("problem", sa.String(32), nullable=True))
    op.create_check_constraint(
        "payment_events_problem_known",
        "payment_events",
        f"problem IS NULL OR problem IN {PROBLEMS!r}",
    )


def downgrade() -> None:
    op.drop_constraint("payment_events_problem_known", "payment_events")
    op.drop_column("payment_events", "problem")
    op.drop_column("payment_events", "currency")
    op.drop_column("orders", "currency")
    op.drop_column("orders", "order_number")
    op.execute("DROP FUNCTION new_order_number()")
