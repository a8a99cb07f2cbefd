"""The ``flask orders`` commands: an order looked up for support, a paid order shipped.

    flask --app webapp orders find KX7P2M9QRT [--link]   an order by the number a customer quotes
    flask --app webapp orders ship KX7P2M9QRT [--by NAME]   its parcel has left

The order number opens nothing on the web: support looks it up here, checks who is
asking against the order, and only then sends the private link (``--link``).

Shipping goes through the order state machine (webapp/shop/order_states.py): only a paid
order ships; shipping one that is already shipped changes nothing and says so. Who
shipped it is stored in ``orders.shipped_by`` and logged (webapp/shop/operators.py). From
then on a refund the customer asks for waits for an operator (``flask refunds reviews``).
"""

from __future__ import annotations

import click
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import select

from ..db import sessions
from ..shop.models import Order
from ..shop.operators import by_option, record
from ..shop.order_rules import normal_order_number
from ..shop.order_states import TransitionRefused, transition

__all__ = ["orders"]

orders = AppGroup(
    "orders",
    help="Orders: look one up by the number a customer quotes, mark a paid one shipped.",
)

#: What to do instead with an order the state machine will not ship, by its status.
_INSTEAD = {
    "placed": "Ship it once its payment has arrived.",
    "cancelled": "The customer cancelled it: do not send it.",
    "refunded": "Its payment was refunded in full: do not send it.",
}


@orders.command("find")
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


@orders.command("ship")
@click.argument("number")
@by_option
@with_appcontext
def ship_order(number: str, by: str) -> None:
    """Mark the paid order with this order number shipped; exit 1 if it cannot be."""
    number = normal_order_number(number)
    with sessions()() as db, db.begin():
        order_id = db.scalar(select(Order.id).where(Order.order_number == number))
        if order_id is None:
            raise click.ClickException(
                f"No order has the number {number!r} ('flask orders find' looks one up)."
            )
        try:
            # shipped_by is written by the transition's own UPDATE: only if it ships now.
            shipped = transition(db, order_id, "ship", shipped_by=by)
        except TransitionRefused as refused:
            raise click.ClickException(
                f"Order {number} was not shipped. {refused} "
                f"{_INSTEAD.get(refused.status, '')}".rstrip()
            ) from None
        earlier = (
            None
            if shipped.changed
            else db.scalar(select(Order.shipped_by).where(Order.id == order_id))
        )
    if not shipped.changed:
        who = earlier or "an operator not recorded"
        click.echo(f"Order {number} was already shipped (by {who}); nothing changed.")
        return
    record("orders ship", by, order_number=number)
    click.echo(
        f"Order {number} is shipped (by {by}). A refund asked for from now on waits "
        "for review (refunds reviews)."
    )
