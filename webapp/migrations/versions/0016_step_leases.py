"""Flask-Submit-Once's step lease: submission_step_lease_owner and _until.

The order form's card charge (its ``submission_step``) was done holding a session-level
advisory lock, which does not hold behind PgBouncer pooling by transaction. The library
now holds a lease on the row instead: who does the step (a random id) and until when,
taken by a conditional UPDATE and ended when the step's result is committed. Every table
of a SubmissionMixin model gets both columns, NULL (nobody doing a step) for every row so
far; a lease left by a process killed mid-step runs out by itself.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

#: As flask_submit_once's LEASE_OWNER_LENGTH; copied, not imported, as in 0006.
LEASE_OWNER_LENGTH = 32
TABLES = ("orders", "order_amendments", "refund_requests")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table,
            sa.Column("submission_step_lease_owner", sa.String(LEASE_OWNER_LENGTH), nullable=True),
        )
        op.add_column(
            table,
            sa.Column("submission_step_lease_until", sa.DateTime(timezone=True), nullable=True),
        )


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "submission_step_lease_until")
        op.drop_column(table, "submission_step_lease_owner")
