"""Refunds after shipping wait for review; messages name their request.

A refund request on a shipped order is ``review`` (reserved, not published)
until an operator approves it (``requested``) or rejects it (``rejected``, its
reservation released). Stream messages now carry the request's id, and the
worker applies only what that row says: messages published by the release
before this one lack the id, so the requests still waiting on them are marked
unpublished here and the relay publishes them again (the UNIQUE refund key
makes an older copy that an old worker applies meanwhile the only one).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

STATUSES = ("requested", "review", "applied", "failed", "rejected")
BEFORE = ("requested", "applied", "failed")


def upgrade() -> None:
    op.drop_constraint("refund_requests_status_known", "refund_requests")
    op.create_check_constraint(
        "refund_requests_status_known", "refund_requests", f"status IN {STATUSES!r}"
    )
    # The relay's queue is requested rows: one waiting for review (or rejected)
    # is never published, nor one applied before its relay marked it.
    op.drop_index("refund_requests_unpublished", "refund_requests")
    op.create_index(
        "refund_requests_unpublished",
        "refund_requests",
        ["id"],
        postgresql_where=sa.text("published_at IS NULL AND status = 'requested'"),
    )
    op.execute(
        "UPDATE refund_requests SET published_at = NULL "
        "WHERE status = 'requested' AND published_at IS NOT NULL"
    )


def downgrade() -> None:
    # The older release would apply a request waiting for review at once: it is
    # failed instead (its reservation released), as a rejected one is.
    op.execute(
        sa.text(
            "UPDATE orders o SET reserved_cents = o.reserved_cents - r.cents FROM "
            "(SELECT order_id, sum(amount_cents) AS cents FROM refund_requests "
            " WHERE status = 'review' GROUP BY order_id) r WHERE o.id = r.order_id"
        )
    )
    op.execute(
        sa.text(
            "UPDATE refund_requests SET status = 'failed', updated_at = now(), "
            "reason = coalesce(reason, 'it was not reviewed, so nothing was refunded') "
            "WHERE status IN ('review', 'rejected')"
        )
    )
    op.drop_constraint("refund_requests_status_known", "refund_requests")
    op.create_check_constraint(
        "refund_requests_status_known", "refund_requests", f"status IN {BEFORE!r}"
    )
    op.drop_index("refund_requests_unpublished", "refund_requests")
    op.create_index(
        "refund_requests_unpublished",
        "refund_requests",
        ["id"],
        postgresql_where=sa.text("published_at IS NULL"),
    )
