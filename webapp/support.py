"""Operator commands for support and bookkeeping.

    flask --app webapp find-order KX7P2M9QRT     an order by the number a customer quotes
    flask --app webapp reconcile-payments        payments recorded against what orders say

The order number opens nothing on the web: support looks it up here, checks who
is asking against the order, and only then sends the private link (``--link``).
"""

from __future__ import annotations

import click
from flask import Flask
from flask.cli import with_appcontext
from sqlalchemy import func, select

from .db import sessions, snapshot
from .models import PAYMENT_PROBLEMS, Order, PaymentEvent
from .order_rules import normal_order_number
from .webhooks.effect import CHECKOUT_CHARGE, KEPT_REFUNDABLE

__all__ = ["init_app"]

#: Payments recorded whose money no order's paid_cents shows (not refundable from the shop).
KEPT_WITHOUT_ORDER = tuple(
    p for p in PAYMENT_PROBLEMS if p not in KEPT_REFUNDABLE and p != CHECKOUT_CHARGE
)
_PAYMENT = PaymentEvent.type == "payment.succeeded"
_COUNTED = PaymentEvent.problem.is_(None) | PaymentEvent.problem.in_(KEPT_REFUNDABLE)


def init_app(app: Flask) -> None:
    app.cli.add_command(find_order)
    app.cli.add_command(reconcile_payments)


@click.command("find-order")
@click.argument("number")
@with_appcontext
@click.option(
    "--link",
    is_flag=True,
    help="Also print the private link (whoever has it "
    "can see and cancel the order: send it only to its customer).",
)
def find_order(number: str, link: bool) -> None:
    """Show the order with this order number; exit 1 if there is none."""
    number = normal_order_number(number)
    with sessions()() as db:
        order = db.scalar(select(Order).where(Order.order_number == number))
        if order is None:
            click.echo(f"No order has the number {number!r}.", err=True)
            raise SystemExit(1)
        click.echo(
            f"order {order.order_number}  status={order.status}  "
            f"placed {order.created_at:%Y-%m-%d %H:%M} UTC"
        )
        click.echo(
            f"  {order.quantity} x {order.product.name} = {order.total_cents} "
            f"{order.currency} cents; paid {order.paid_cents}, "
            f"refunded {order.refunded_cents}"
        )
        click.echo(f"  customer: {order.customer_name} <{order.email}>")
        # What the provider's dashboard and events show for it (it opens nothing).
        click.echo(f"  payment reference: {order.payment_reference}")
        if link:
            click.echo(f"  link: /orders/{order.public_id}")


@click.command("reconcile-payments")
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
