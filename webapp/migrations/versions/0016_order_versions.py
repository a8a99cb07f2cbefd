"""An order's version: the delivery details of an unpaid order are changed from a page that
says which version it showed.

``orders.version``: SQLAlchemy's version counter (Flask-Submit-Once's ``VersionedMixin``),
1 for every order there is, one more with every change the ORM writes. An update of the
order's details (webapp/orders/amend_views.py) made from a page drawn before another
update landed (a second tab) is refused with the order as it is now, not written over.

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


def upgrade() -> None:
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.add_column(
        "orders", sa.Column("version", sa.Integer, nullable=False, server_default=sa.text("1"))
    )


def downgrade() -> None:
    op.drop_column("orders", "version")
