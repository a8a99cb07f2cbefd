"""Marking an order shipped, once its parcel has left:

    flask --app webapp ship-order KX7P2M9QRT [--by NAME]

Through the order state machine (webapp/order_states.py): only a paid order ships;
shipping one that is already shipped changes nothing and says so. Who shipped it is
stored in ``orders.shipped_by`` and logged (webapp/operators.py). From then on a refund
the customer asks for waits for an operator (``refund-reviews``).
"""

from __future__ import annotations

import click
from flask import Flask
from flask.cli import with_appcontext
from sqlalchemy import select

from .db import sessions
from .models import Order
from .operators import by_option, record
from .order_rules import normal_order_number
from .order_states import TransitionRefused, transition

__all__ = ["init_app"]

#: What to do instead with an order the state machine will not ship, by its status.
_INSTEAD = {
    "placed": "Ship it once its payment has arrived.",
    "cancelled": "The customer cancelled it: do not send it.",
    "refunded": "Its payment was refunded in full: do not send it.",
}


def init_app(app: Flask) -> None:
    app.cli.add_command(ship_order)


@click.command("ship-order")
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
                f"No order has the number {number!r} (find-order looks one up)."
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
    record("ship-order", by, order_number=number)
    click.echo(
        f"Order {number} is shipped (by {by}). A refund asked for from now on waits "
        "for review (refund-reviews)."
    )
