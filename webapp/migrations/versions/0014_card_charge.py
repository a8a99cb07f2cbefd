"""The checkout's card charge: orders that are being charged, or were declined.

An order placed through the form with a card is written ``charging`` with the card's
``payment_method`` (the provider's token; the shop never stores a card number), then
charged once (the order form's step, ``submission_step = 'charge'`` meanwhile) and
written ``paid`` with its ``charge_id``, or ``declined`` with the bank's
``decline_code``. ``charge_id`` is UNIQUE: one charge pays one order. Rows written
before have none of these and keep their status.

payment_events.problem may be ``checkout_charge``: the provider's event announcing the
checkout's own charge, whose money the order's charge already counts (never twice).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: As webapp.shop.models.PROVIDER_ID_MAX; copied, not imported, as in 0006.
PROVIDER_ID_MAX = 64
STATUSES = ("placed", "charging", "paid", "shipped", "cancelled", "refunded", "declined")
BEFORE = ("placed", "paid", "shipped", "cancelled", "refunded")
COLUMNS = ("payment_method", "charge_id", "decline_code")
PROBLEMS = (
    "amount_mismatch",
    "currency_mismatch",
    "order_closed",
    "after_cancel",
    "extra_payment",
    "checkout_charge",
)
PROBLEMS_BEFORE = PROBLEMS[:-1]


def problems(known: tuple[str, ...]) -> None:
    op.drop_constraint("payment_events_problem_known", "payment_events")
    op.create_check_constraint(
        "payment_events_problem_known", "payment_events", f"problem IS NULL OR problem IN {known!r}"
    )


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column("orders", sa.Column(column, sa.String(PROVIDER_ID_MAX), nullable=True))
    op.create_unique_constraint("orders_charge_id_key", "orders", ["charge_id"])
    op.create_check_constraint(
        "orders_charging_has_card", "orders", "status <> 'charging' OR payment_method IS NOT NULL"
    )
    op.drop_constraint("orders_status_known", "orders")
    op.create_check_constraint("orders_status_known", "orders", f"status IN {STATUSES!r}")
    problems(PROBLEMS)


def downgrade() -> None:
    op.execute("UPDATE payment_events SET problem = NULL WHERE problem = 'checkout_charge'")
    problems(PROBLEMS_BEFORE)
    # Orders still being charged or declined have no status in the older release: an
    # interrupted charge must be finished (flask submit-once resume) before going back.
    op.drop_constraint("orders_status_known", "orders")
    op.create_check_constraint("orders_status_known", "orders", f"status IN {BEFORE!r}")
    op.drop_constraint("orders_charging_has_card", "orders")
    op.drop_constraint("orders_charge_id_key", "orders")
    for column in reversed(COLUMNS):
        op.drop_column("orders", column)
