"""What an order's form carried, beside the digest that made it once.

A resubmit of the same rendering (Back, edit, submit; a duplicated tab) whose
fields differ from the stored fingerprint is told so and places nothing, instead
of landing on the first order as if it were what was just sent. Orders placed
before this column, and through the JSON API, have none: their repeats land.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("orders", sa.Column("submission_fingerprint", sa.String(43), nullable=True))


def downgrade() -> None:
    op.drop_column("orders", "submission_fingerprint")
