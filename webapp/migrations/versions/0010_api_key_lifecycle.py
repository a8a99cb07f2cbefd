"""API keys that can be revoked, expire, and say when they were last used.

``key_prefix`` is the key's first characters (``sk_`` and 8 more: 48 of its 256
random bits, leaving 208 unknown), shown by ``list-api-keys`` and named by
``revoke-api-key --key``; keys made before this migration have none (revoke them
by client, or with the whole key). ``expires_at`` NULL: no expiry.
``last_used_at`` is written at most once a minute per key.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("key_prefix", "expires_at", "revoked_at", "last_used_at")


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("key_prefix", sa.String(16), nullable=True))
    for name in COLUMNS[1:]:
        op.add_column("api_keys", sa.Column(name, sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("api_keys", name)
