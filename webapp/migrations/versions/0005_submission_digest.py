"""orders.form_token_digest becomes orders.submission_digest: it also holds the
digests of API Idempotency-Keys, not only of form tokens.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.alter_column("orders", "form_token_digest", new_column_name="submission_digest")
    # Renaming the UNIQUE constraint renames its index with it.
    op.execute(
        "ALTER TABLE orders RENAME CONSTRAINT orders_form_token_digest_key "
        "TO orders_submission_digest_key"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE orders RENAME CONSTRAINT orders_submission_digest_key "
        "TO orders_form_token_digest_key"
    )
    op.alter_column("orders", "submission_digest", new_column_name="form_token_digest")
