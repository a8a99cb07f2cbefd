"""Refunds after shipping need a person: the operator's commands.

    flask --app webapp refunds reviews                           what waits, oldest first
    flask --app webapp refunds approve <request id> [--by NAME]   it is published and applied
    flask --app webapp refunds reject <request id> --reason TEXT [--by NAME]
                                                                 released, not refunded
    flask --app webapp refunds photo <request id> --out FILE [--by NAME]
                                                                 the customer's photo, saved

A request on a shipped order is reserved and waits (requests.py); the worker
never sees it before it is approved. Who approved or rejected it is stored in
``refund_requests.reviewed_by`` and logged (webapp/shop/operators.py). The photo a
customer attached (photos.py) is seen here only, and who saved it is logged: no page
serves it, so the order's link opens nothing of it.
"""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import sessions
from ..shop.models import Order, RefundPhoto, RefundRequest
from ..shop.operators import by_option, record
from ..shop.order_rules import has_control_chars
from .cli import refunds
from .forms import euros
from .requests import ReviewRefused, approve_request, reject_request

#: The longest reason a rejection may give (the customer's order page shows it).
REASON_MAX = 500


@refunds.command("reviews")
def refund_reviews() -> None:
    """List the refund requests waiting for review, oldest first."""
    with sessions()() as db:
        rows = db.execute(
            select(
                RefundRequest.id,
                RefundRequest.amount_cents,
                RefundRequest.created_at,
                Order.id.label("order_id"),
                Order.order_number,
                Order.paid_cents,
                Order.refunded_cents,
                RefundPhoto.content_type.label("photo_type"),
            )
            .join(Order, Order.id == RefundRequest.order_id)
            .outerjoin(RefundPhoto, RefundPhoto.refund_request_id == RefundRequest.id)
            .where(RefundRequest.status == "review")
            .order_by(RefundRequest.id)
        ).all()
    if not rows:
        click.echo("No refund requests wait for review.")
    for row in rows:
        click.echo(
            f"request {row.id}: {euros(row.amount_cents)} on order {row.order_id} "
            f"({row.order_number}; paid {euros(row.paid_cents)}, refunded "
            f"{euros(row.refunded_cents)}), asked {row.created_at:%Y-%m-%d %H:%M} UTC"
            + (f"; with a photo (refunds photo {row.id} --out FILE)" if row.photo_type else "")
        )


@refunds.command("approve")
@click.argument("request_id", type=int)
@by_option
def approve_refund(request_id: int, by: str) -> None:
    """Approve a refund request that waits for review: the worker applies it."""
    try:
        with sessions()() as db, db.begin():
            request = approve_request(db, request_id)
            # in the same transaction as the approval
            request.reviewed_by = by
            number = _order_number(db, request)
    # nothing written
    except ReviewRefused as refused:
        raise click.ClickException(str(refused)) from None
    record(
        "refunds approve",
        by,
        refund_request=request.id,
        order_number=number,
        amount_cents=request.amount_cents,
    )
    click.echo(
        f"Approved by {by}: {euros(request.amount_cents)} for order {number} "
        f"(request {request.id}) will be published and applied by the worker."
    )


@refunds.command("photo")
@click.argument("request_id", type=int)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to save the photo to (a new one: nothing is written over).",
)
@by_option
def refund_photo(request_id: int, out: Path, by: str) -> None:
    """Save the photo attached to a refund request, to look at before approving or
    rejecting it; who saved it is logged."""
    with sessions()() as db:
        photo = db.scalar(select(RefundPhoto).where(RefundPhoto.refund_request_id == request_id))
    if photo is None:
        raise click.ClickException(f"Refund request {request_id} has no photo.")
    try:
        # "x": never over a file the operator already has
        with out.open("xb") as file:
            file.write(photo.data)
    except FileExistsError:
        raise click.ClickException(f"{out} exists already: name a new file.") from None
    record("refunds photo", by, refund_request=request_id)
    click.echo(
        f"Saved the photo of refund request {request_id} to {out}: {photo.content_type}, "
        f"{len(photo.data):,} bytes, sent as {photo.filename}."
    )


def _reason(_context: click.Context, _param: click.Parameter, value: str | None) -> str:
    """The customer reads it on their order page: it must be said, in words."""
    if value is None:
        raise click.UsageError(
            "--reason is required: say why, in words for the customer "
            "(their order page shows it), e.g. --reason 'the parcel has "
            "not come back to us'."
        )
    reason = value.strip()
    if not reason or len(reason) > REASON_MAX or has_control_chars(reason):
        raise click.BadParameter(f"give 1 to {REASON_MAX} printable characters")
    return reason


@refunds.command("reject")
@click.argument("request_id", type=int)
@click.option(
    "--reason",
    callback=_reason,
    metavar="TEXT",
    help="Required: why, as the customer's order page will say it.",
)
@by_option
def reject_refund(request_id: int, reason: str, by: str) -> None:
    """Reject a refund request that waits for review: nothing is refunded and its
    amount is no longer set aside."""
    try:
        with sessions()() as db, db.begin():
            request = reject_request(db, request_id, reason)
            request.reviewed_by = by
            number = _order_number(db, request)
    # nothing written
    except ReviewRefused as refused:
        raise click.ClickException(str(refused)) from None
    record(
        "refunds reject",
        by,
        refund_request=request.id,
        order_number=number,
        amount_cents=request.amount_cents,
        reason=reason,
    )
    click.echo(
        f"Rejected by {by}: {euros(request.amount_cents)} for order {number} "
        f"(request {request.id}); the order page says: {reason}"
    )


def _order_number(db: Session, request: RefundRequest) -> str | None:
    """What people quote for the request's order (its id means nothing to them)."""
    return db.scalar(select(Order.order_number).where(Order.id == request.order_id))
