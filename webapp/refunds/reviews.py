"""Refunds after shipping need a person: the operator's commands.

    flask --app webapp refund-reviews                       what waits, oldest first
    flask --app webapp approve-refund <request id>          it is published and applied
    flask --app webapp reject-refund <request id> [--reason TEXT]   released, not refunded

A request on a shipped order is reserved and waits (requests.py); the worker
never sees it before it is approved.
"""

from __future__ import annotations

import click
from sqlalchemy import select

from ..db import sessions
from ..models import Order, RefundRequest
from .forms import euros
from .requests import ReviewRefused, approve_request, reject_request
from .views import bp

REJECTED = "our team reviewed it and could not refund it; please contact us"


@bp.cli.command("refund-reviews")
def refund_reviews() -> None:
    """List the refund requests waiting for review, oldest first."""
    with sessions()() as db:
        rows = db.execute(
            select(RefundRequest.id, RefundRequest.amount_cents, RefundRequest.created_at,
                   Order.id.label("order_id"), Order.order_number, Order.paid_cents,
                   Order.refunded_cents)
            .join(Order, Order.id == RefundRequest.order_id)
            .where(RefundRequest.status == "review").order_by(RefundRequest.id)).all()
    if not rows:
        click.echo("No refund requests wait for review.")
    for row in rows:
        click.echo(f"request {row.id}: {euros(row.amount_cents)} on order {row.order_id} "
                   f"({row.order_number}; paid {euros(row.paid_cents)}, refunded "
                   f"{euros(row.refunded_cents)}), asked {row.created_at:%Y-%m-%d %H:%M} UTC")


@bp.cli.command("approve-refund")
@click.argument("request_id", type=int)
def approve_refund(request_id: int) -> None:
    """Approve a refund request that waits for review: the worker applies it."""
    try:
        with sessions()() as db, db.begin():
            request = approve_request(db, request_id)
    except ReviewRefused as refused:  # nothing written
        raise click.ClickException(str(refused)) from None
    click.echo(f"Approved: {euros(request.amount_cents)} for order {request.order_id} "
               f"(request {request.id}) will be published and applied by the worker.")


@bp.cli.command("reject-refund")
@click.argument("request_id", type=int)
@click.option("--reason", default=REJECTED, show_default=True,
              help="What the customer's order page says about it.")
def reject_refund(request_id: int, reason: str) -> None:
    """Reject a refund request that waits for review: nothing is refunded and its
    amount is no longer set aside."""
    try:
        with sessions()() as db, db.begin():
            request = reject_request(db, request_id, reason)
    except ReviewRefused as refused:  # nothing written
        raise click.ClickException(str(refused)) from None
    click.echo(f"Rejected: {euros(request.amount_cents)} for order {request.order_id} "
               f"(request {request.id}); the order page says: {reason}")

