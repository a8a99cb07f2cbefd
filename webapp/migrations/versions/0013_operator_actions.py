"""Operator actions record who did them.

``orders.shipped_by`` (``ship-order``), ``products.changed_by`` and ``changed_at``
(the ``products`` commands: the last change), ``refund_requests.reviewed_by``
(``approve-refund`` / ``reject-refund``) and ``requeued_by`` (``refund-dead-letters
--requeue``): the operator's name (``--by``, else SUDO_USER, else the login user).
NULL on rows written before, or by the shop itself (the demo catalogue, a refund that
needed no review).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

#: (table, column): who did an action on that row.
BY = (
    ("orders", "shipped_by"),
    ("products", "changed_by"),
    ("refund_requests", "reviewed_by"),
    ("refund_requests", "requeued_by"),
)
#: As webapp.shop.models.OPERATOR_MAX; copied, not imported, as in 0006.
OPERATOR_MAX = 100


def upgrade() -> None:
    for table, column in BY:
        op.add_column(table, sa.Column(column, sa.String(OPERATOR_MAX), nullable=True))
    op.add_column("products", sa.Column("changed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("products", "changed_at")
    for table, column in reversed(BY):
        op.drop_column(table, column)
