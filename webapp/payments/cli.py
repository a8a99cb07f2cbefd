"""The ``flask payments`` commands: the books of card payments.

flask --app webapp payments reconcile   payments recorded against what orders say
"""

from __future__ import annotations

import click
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import func, select

from ..db import snapshot
from ..shop.models import (
    CHECKOUT_CHARGE,
    KEPT_REFUNDABLE,
    PAYMENT_PROBLEMS,
    Order,
    PaymentEvent,
)

__all__ = ["payments"]

payments = AppGroup("payments", help="Payments: check the money recorded against the orders.")

#: Payments recorded whose money no order's paid_cents shows (not refundable from the shop).
KEPT_WITHOUT_ORDER = tuple(
    p for p in PAYMENT_PROBLEMS if p not in KEPT_REFUNDABLE and p != CHECKOUT_CHARGE
)
_PAYMENT = PaymentEvent.type == "payment.succeeded"
_COUNTED = PaymentEvent.problem.is_(None) | PaymentEvent.problem.in_(KEPT_REFUNDABLE)


@payments.command("reconcile")
@with_appcontext
def reconcile_payments() -> None:
    """Compare recorded payments (events, and the checkout's own charges: an order's
    charge_id, for its total) with orders.paid_cents and list payments kept without an
    order to show for them; exit 1 if the totals differ."""
    with snapshot() as db:
        counted = db.scalar(
            select(func.coalesce(func.sum(PaymentEvent.amount_cents), 0)).where(_PAYMENT, _COUNTED)
        )
        charged = db.scalar(
            select(func.coalesce(func.sum(Order.unit_price_cents * Order.quantity), 0)).where(
                Order.charge_id.is_not(None)
            )
        )
        paid = db.scalar(select(func.coalesce(func.sum(Order.paid_cents), 0)))
        kept = db.execute(
            select(
                PaymentEvent.event_id,
                PaymentEvent.amount_cents,
                PaymentEvent.currency,
                PaymentEvent.problem,
                Order.order_number,
                Order.status,
            )
            .join(Order, Order.id == PaymentEvent.order_id)
            .where(_PAYMENT, PaymentEvent.problem.in_(KEPT_WITHOUT_ORDER))
            .order_by(PaymentEvent.id)
        ).all()
    click.echo(f"payments applied:      {counted} cents")
    click.echo(f"charged at checkout:   {charged} cents")
    click.echo(f"orders.paid_cents:     {paid} cents")
    click.echo(f"kept without an order: {len(kept)} payments (refund them at the provider)")
    for row in kept:
        click.echo(
            f"  event {row.event_id}: {row.amount_cents} {row.currency} "
            f"{row.problem}, order {row.order_number} ({row.status})"
        )
    matched = counted + charged == paid
    click.echo(f"result:                {'MATCH' if matched else 'MISMATCH'}")
    if not matched:
        raise SystemExit(1)
