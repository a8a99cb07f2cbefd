"""The ``flask refunds`` commands: reconcile refunds, list and requeue dead letters.

    flask --app webapp refunds reconcile
    flask --app webapp refunds dead-letters [--requeue <dead letter id> [--by NAME]]

(Approving refunds after shipping: reviews.py, in the same group.)
"""

from __future__ import annotations

import click
from flask.cli import AppGroup
from redis.exceptions import RedisError
from sqlalchemy import String, cast, exists, func, or_, select

from ..db import sessions, snapshot
from ..extensions import submit_once
from ..shop.models import Order, PaymentEvent, RefundRecord, RefundRequest
from ..shop.operators import by_option, record
from .forms import euros
from .requests import RequeueRefused, requeue_request
from .stream import DEAD_LETTERS, GROUP, STREAM, short

refunds = AppGroup(
    "refunds",
    help="Refunds: check them against the orders, review the ones that wait for a "
    "person (after shipping), and see or requeue the ones the worker gave up on.",
)


def _cents(*where) -> object:
    return (
        select(func.coalesce(func.sum(RefundRequest.amount_cents), 0))
        .where(*where)
        .scalar_subquery()
    )


def _count(*where) -> object:
    return select(func.count()).select_from(RefundRequest).where(*where).scalar_subquery()


_TOTALS = select(
    select(func.count()).select_from(RefundRecord).scalar_subquery().label("records"),
    select(func.coalesce(func.sum(RefundRecord.amount_cents), 0))
    .scalar_subquery()
    .label("records_cents"),
    select(func.coalesce(func.sum(Order.refunded_cents), 0))
    .scalar_subquery()
    .label("orders_cents"),
    select(func.count()).where(Order.refunded_cents > 0).scalar_subquery().label("refunded_orders"),
    select(func.coalesce(func.sum(Order.reserved_cents), 0))
    .scalar_subquery()
    .label("reserved_cents"),
    _count().label("requests"),
    _cents().label("requests_cents"),
    # Pending: reserved and not yet applied, whether published or waiting for review.
    *(
        part
        for statuses, name in (
            (("applied",), "applied"),
            (("requested", "review"), "pending"),
            (("review",), "review"),
            (("failed",), "failed"),
            (("rejected",), "rejected"),
        )
        for part in (
            _count(RefundRequest.status.in_(statuses)).label(name),
            _cents(RefundRequest.status.in_(statuses)).label(f"{name}_cents"),
        )
    ),
    # An applied request without its refund record (same key, same amount) is a lie.
    select(func.count())
    .select_from(RefundRequest)
    .outerjoin(RefundRecord, RefundRecord.idempotency_key == RefundRequest.idempotency_key)
    .where(
        RefundRequest.status == "applied",
        func.coalesce(RefundRecord.amount_cents, -1) != RefundRequest.amount_cents,
    )
    .scalar_subquery()
    .label("applied_unrecorded"),
)
# Per order: what its records add up to against what the order says, and what
# its pending requests add up to against what it has reserved.
_RECORDS_CENTS = (
    select(func.coalesce(func.sum(RefundRecord.amount_cents), 0))
    .where(RefundRecord.order_id == Order.id)
    .scalar_subquery()
)
_PENDING_CENTS = _cents(
    RefundRequest.order_id == Order.id, RefundRequest.status.in_(("requested", "review"))
)
_DISAGREEING = (
    select(
        Order.id,
        Order.refunded_cents,
        _RECORDS_CENTS.label("records_cents"),
        Order.reserved_cents,
        _PENDING_CENTS.label("pending_cents"),
    )
    .where((Order.refunded_cents != _RECORDS_CENTS) | (Order.reserved_cents != _PENDING_CENTS))
    .order_by(Order.id)
    .limit(20)
)
# Every refund applied has something behind it: the customer's request (applied,
# same key, order and amount) or the provider's refund event it was recorded
# from ("webhook:<payment_events.id>"; plain "webhook" before that was kept).
_REQUEST_BEHIND = exists().where(
    RefundRequest.idempotency_key == RefundRecord.idempotency_key,
    RefundRequest.status == "applied",
    RefundRequest.order_id == RefundRecord.order_id,
    RefundRequest.amount_cents == RefundRecord.amount_cents,
)
_EVENT_BEHIND = exists().where(
    PaymentEvent.type == "refund.succeeded",
    PaymentEvent.problem.is_(None),
    PaymentEvent.order_id == RefundRecord.order_id,
    PaymentEvent.amount_cents == RefundRecord.amount_cents,
    or_(
        RefundRecord.message_id == "webhook:" + cast(PaymentEvent.id, String),
        RefundRecord.message_id == "webhook",
    ),
)
_UNBACKED = ~_REQUEST_BEHIND & ~_EVENT_BEHIND
_UNBACKED_COUNT = select(func.count()).select_from(RefundRecord).where(_UNBACKED)
_UNBACKED_ROWS = (
    select(RefundRecord.order_id, RefundRecord.amount_cents, RefundRecord.message_id)
    .where(_UNBACKED)
    .order_by(RefundRecord.id)
    .limit(20)
)


@refunds.command("reconcile")
def reconcile_refunds() -> None:
    """Compare refund_records with orders.refunded_cents, and pending refund
    requests with orders.reserved_cents; find every refund with no request or
    payment event behind it; exit 1 if anything differs."""
    with snapshot() as db:
        t = db.execute(_TOTALS).one()
        disagreeing = db.execute(_DISAGREEING).all()
        unbacked = db.scalar(_UNBACKED_COUNT)
        unbacked_rows = db.execute(_UNBACKED_ROWS).all()
    click.echo(f"refund_records:        {t.records} refunds, {t.records_cents} cents")
    click.echo(f"orders.refunded_cents: {t.orders_cents} cents over {t.refunded_orders} orders")
    click.echo(
        f"refund_requests:       {t.requests} requested ({t.requests_cents} cents) = "
        f"{t.applied} applied ({t.applied_cents}) + {t.pending} pending "
        f"({t.pending_cents}) + {t.failed} failed ({t.failed_cents}) + "
        f"{t.rejected} rejected ({t.rejected_cents})"
    )
    click.echo(f"waiting for review:    {t.review} requests ({t.review_cents} cents)")
    click.echo(f"orders.reserved_cents: {t.reserved_cents} cents")
    click.echo(f"applied, unrecorded:   {t.applied_unrecorded}")
    click.echo(f"applied, unbacked:     {unbacked}")
    for row in unbacked_rows:
        click.echo(
            f"  order {row.order_id}: {row.amount_cents} cents by message "
            f"{row.message_id}, with no request or payment event behind it"
        )
    click.echo(f"orders that disagree:  {len(disagreeing)}")
    for row in disagreeing:
        click.echo(
            f"  order {row.id}: refunded_cents={row.refunded_cents} "
            f"records={row.records_cents} reserved_cents={row.reserved_cents} "
            f"pending={row.pending_cents}"
        )
    click.echo(f"stream:                {_stream_summary()}")
    matched = (
        t.records_cents == t.orders_cents
        and not disagreeing
        and t.reserved_cents == t.pending_cents
        and t.applied_unrecorded == 0
        and unbacked == 0
        and t.requests_cents
        == t.applied_cents + t.pending_cents + t.failed_cents + t.rejected_cents
    )
    click.echo(f"result:                {'MATCH' if matched else 'MISMATCH'}")
    if not matched:
        raise SystemExit(1)


@refunds.command("dead-letters")
@click.option("--count", default=100, show_default=True, help="Show at most this many.")
@click.option(
    "--requeue",
    "requeue_id",
    metavar="ID",
    help="Put this dead letter's refund request back (once its cause is fixed).",
)
@by_option
def refund_dead_letters(count: int, requeue_id: str | None, by: str) -> None:
    """List refunds the worker gave up on, newest first, with the reason; or requeue one
    (who requeued it is stored in refund_requests.requeued_by)."""
    if requeue_id is not None:
        requeue(requeue_id, by)
        return
    entries = submit_once.redis.xrevrange(DEAD_LETTERS, count=count)
    if not entries:
        click.echo("No dead-lettered refunds.")
        return
    for entry_id, fields in entries:
        click.echo(
            f"{entry_id}  message={fields.get('message_id', '?')} "
            f"request={fields.get('request', '-')} "
            f"key={short(fields.get('key', '')) or '-'} "
            f"order={fields.get('order', '?')} amount={fields.get('amount', '?')} "
            f"deliveries={fields.get('deliveries', '?')}  reason: {fields.get('reason')}"
        )


def requeue(entry_id: str, by: str) -> None:
    """Reserve the request's amount again and leave it to the relay to publish (or
    for review, if the order has shipped); then delete the dead letter. Refused
    (exit 1) with the reason otherwise."""
    try:
        entries = submit_once.redis.xrange(DEAD_LETTERS, entry_id, entry_id)
    # e.g. an id that is not a stream id
    except RedisError as error:
        raise click.ClickException(f"Cannot read dead letter {entry_id!r}: {error}") from None
    if not entries:
        raise click.ClickException(f"No dead letter has the id {entry_id!r}.")
    ((_, fields),) = entries
    try:
        with sessions()() as db, db.begin():
            request = requeue_request(db, fields.get("key", ""), fields.get("request"))
            # in the same transaction as the requeue
            request.requeued_by = by
    except RequeueRefused as refused:
        raise click.ClickException(f"Not requeued: {refused}.") from None
    record(
        "requeue-refund",
        by,
        refund_request=request.id,
        dead_letter=entry_id,
        amount_cents=request.amount_cents,
    )
    # After the commit: should this fail, the letter stays, and requeueing it
    # again is refused because its request is no longer failed.
    submit_once.redis.xdel(DEAD_LETTERS, entry_id)
    then = (
        "waits for review, since the order has shipped: flask --app webapp "
        f"refunds approve {request.id} (or refunds reject)"
        if request.status == "review"
        else "will be published to the stream by the relay"
    )
    click.echo(
        f"Requeued: {euros(request.amount_cents)} for order {request.order_id} "
        f"(key {short(request.idempotency_key)}) is reserved again and {then}."
    )


def _stream_summary() -> str:
    client = submit_once.redis
    try:
        messages = client.xlen(STREAM)
        groups = {g["name"]: g for g in client.xinfo_groups(STREAM)} if messages else {}
        pending = groups[GROUP]["pending"] if GROUP in groups else 0
        return f"{messages} messages, {pending} pending, {client.xlen(DEAD_LETTERS)} dead-lettered"
    except RedisError as error:
        return f"unavailable ({type(error).__name__})"
