"""Orders that can be changed after they are placed, and the same order placed twice.

``order_amendments``: one row per "Update order N with these details" that took effect
(webapp/orders/amending.py), keyed by its form token's digest (UNIQUE, as for orders),
with what it changed (``changes``: field -> [before, after]).

``orders.placed_in_session``: a digest of the shopper's browser session that placed an
order through the form (NULL for API orders and rows written before), so that the same
order sent again from that session within minutes is asked about before it is placed
(webapp/orders/same_order.py); indexed with the time, which that question reads.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-12
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: A submission digest's length (as webapp.shop.models.DIGEST_LENGTH; copied, not imported).
DIGEST_LENGTH = 43


def upgrade() -> None:
    op.create_table(
        "order_amendments",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("order_id", sa.BigInteger, sa.ForeignKey("orders.id"), nullable=False),
        sa.Column("submission_digest", sa.String(DIGEST_LENGTH), nullable=False, unique=True),
        sa.Column("submission_fingerprint", sa.String(DIGEST_LENGTH), nullable=True),
        sa.Column("submission_step", sa.String(64), nullable=True),
        sa.Column("changes", JSONB, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index("order_amendments_order_id", "order_amendments", ["order_id"])
    op.add_column("orders", sa.Column("placed_in_session", sa.String(DIGEST_LENGTH), nullable=True))
    op.create_index(
        "orders_placed_in_session",
        "orders",
        ["placed_in_session", "created_at"],
        postgresql_where=sa.text("placed_in_session IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("orders_placed_in_session", "orders")
    op.drop_column("orders", "placed_in_session")
    op.drop_index("order_amendments_order_id", "order_amendments")
    op.drop_table("order_amendments")
