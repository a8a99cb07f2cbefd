"""A refund request may carry a photo, for the operator who reviews it.

``refund_photos``: one row a refund request at most (its key is the request's), written
in the request's own transaction; the bytes in PostgreSQL beside the request, so a
backup holds both and nothing else needs to be kept in step. The content type is what
the bytes were recognised as (JPEG, PNG or WebP), never what the browser said.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: As webapp.shop.models.REFUND_PHOTO_TYPES and PHOTO_NAME_MAX; copied, not imported, as in 0006.
TYPES = ("image/jpeg", "image/png", "image/webp")
NAME_MAX = 255


def upgrade() -> None:
    op.create_table(
        "refund_photos",
        sa.Column(
            "refund_request_id",
            sa.BigInteger,
            sa.ForeignKey("refund_requests.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("content_type", sa.String(16), nullable=False),
        sa.Column("filename", sa.String(NAME_MAX), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(f"content_type IN {TYPES!r}", name="refund_photos_type_known"),
        sa.CheckConstraint("octet_length(data) > 0", name="refund_photos_not_empty"),
    )


def downgrade() -> None:
    op.drop_table("refund_photos")
