"""Operator commands: reconcile refunds, list dead letters.

    flask --app webapp reconcile-refunds
    flask --app webapp refund-dead-letters
"""

from __future__ import annotations

import click
from redis.exceptions import RedisError
from sqlalchemy import func, select, text

from ..db import sessions
from ..extensions import form_tokens
from ..models import Order, RefundRecord
from .stream import DEAD_LETTERS, GROUP, STREAM, short
from .views import bp

_TOTALS = select(
    select(func.count()).select_from(RefundRecord).scalar_subquery().label("records"),
    select(func.coalesce(func.sum(RefundRecord.amount_cents), 0)).scalar_subquery()
    .label("records_cents"),
    select(func.coalesce(func.sum(Order.refunded_cents), 0)).scalar_subquery()
    .label("orders_cents"),
    select(func.count()).where(Order.refunded_cents > 0).scalar_subquery()
    .label("refunded_orders"),
)
# Per order: what its records add up to against what the order says.
_RECORDS_CENTS = func.coalesce(func.sum(RefundRecord.amount_cents), 0)
_DISAGREEING = (
    select(Order.id, Order.refunded_cents, _RECORDS_CENTS.label("records_cents"))
    .outerjoin(RefundRecord)
    .group_by(Order.id)
    .having(Order.refunded_cents != _RECORDS_CENTS)
    .order_by(Order.id)
    .limit(20)
)


@bp.cli.command("reconcile-refunds")
def reconcile_refunds() -> None:
    """Compare refund_records with orders.refunded_cents; exit 1 if they differ."""
    with sessions()() as db, db.begin():
        db.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
        totals = db.execute(_TOTALS).one()
        disagreeing = db.execute(_DISAGREEING).all()
    click.echo(f"refund_records:        {totals.records} refunds, "
               f"{totals.records_cents} cents")
    click.echo(f"orders.refunded_cents: {totals.orders_cents} cents "
               f"over {totals.refunded_orders} orders")
    click.echo(f"orders that disagree:  {len(disagreeing)}")
    for row in disagreeing:
        click.echo(f"  order {row.id}: refunded_cents={row.refunded_cents} "
                   f"records={row.records_cents}")
    click.echo(f"stream:                {_stream_summary()}")
    matched = totals.records_cents == totals.orders_cents and not disagreeing
    click.echo(f"result:                {'MATCH' if matched else 'MISMATCH'}")
    if not matched:
        raise SystemExit(1)


@bp.cli.command("refund-dead-letters")
@click.option("--count", default=100, show_default=True, help="Show at most this many.")
def refund_dead_letters(count: int) -> None:
    """List refunds the worker gave up on, newest first, with the reason."""
    entries = form_tokens.redis.xrevrange(DEAD_LETTERS, count=count)
    if not entries:
        click.echo("No dead-lettered refunds.")
        return
    for entry_id, fields in entries:
        click.echo(f"{entry_id}  message={fields.get('message_id', '?')} "
                   f"key={short(fields.get('key', '')) or '-'} "
                   f"order={fields.get('order', '?')} amount={fields.get('amount', '?')} "
                   f"deliveries={fields.get('deliveries', '?')}  reason: {fields.get('reason')}")


def _stream_summary() -> str:
    client = form_tokens.redis
    try:
        messages = client.xlen(STREAM)
        groups = {g["name"]: g for g in client.xinfo_groups(STREAM)} if messages else {}
        pending = groups[GROUP]["pending"] if GROUP in groups else 0
        return (f"{messages} messages, {pending} pending, "
                f"{client.xlen(DEAD_LETTERS)} dead-lettered")
    except RedisError as error:
        return f"unavailable ({type(error).__name__})"
