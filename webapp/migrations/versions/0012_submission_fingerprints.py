"""Flask-Submit-Once's columns: submission_fingerprint and submission_step.

Refund requests: the refund form is protected by the library's model mixin. The
request's digest stays in refund_requests.idempotency_key (the column the worker and the
stream know), and the fingerprint of the amount the form sent is kept beside it in the
new submission_fingerprint, so that the same form sent again with another amount is told
so. Requests made before have none: a resubmit of one of their forms lands on the
request, as before.

API orders: what a request with an Idempotency-Key was is the library's
submission_fingerprint now, as for the form's orders; orders.request_fingerprint
(the API's own, another format) goes, and with it its part of
orders_api_fields_together. A retry of a key used before this release, within its
retention, is replayed without its body being compared.

Both tables get submission_step too, the library's mark of a step outside the database
still to do for a submission (the order form's card charge): NULL for every row so far.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TOGETHER = "orders_api_fields_together"


def upgrade() -> None:
    op.add_column(
        "refund_requests", sa.Column("submission_fingerprint", sa.String(43), nullable=True)
    )
    for table in ("orders", "refund_requests"):
        op.add_column(table, sa.Column("submission_step", sa.String(64), nullable=True))
    op.drop_constraint(TOGETHER, "orders")
    op.drop_column("orders", "request_fingerprint")
    op.create_check_constraint(
        TOGETHER, "orders", "(api_client_id IS NULL) = (idempotency_key IS NULL)"
    )


def downgrade() -> None:
    op.drop_constraint(TOGETHER, "orders")
    op.add_column("orders", sa.Column("request_fingerprint", sa.String(64), nullable=True))
    # The old format cannot be rebuilt from what is stored: a placeholder, so that the old
    # constraint holds (a retry of these keys is then told the key was reused).
    op.execute("UPDATE orders SET request_fingerprint = '' WHERE api_client_id IS NOT NULL")
    op.create_check_constraint(
        TOGETHER,
        "orders",
        "(api_client_id IS NULL) = (idempotency_key IS NULL)"
        " AND (idempotency_key IS NULL) = (request_fingerprint IS NULL)",
    )
    for table in ("orders", "refund_requests"):
        op.drop_column(table, "submission_step")
    op.drop_column("refund_requests", "submission_fingerprint")
