"""``flask --app webapp init-db``: the migrations, and the demo catalogue when asked.

    flask --app webapp init-db            migrations; the demo catalogue in development
    flask --app webapp init-db --demo     ... and the demo catalogue (safe to run twice)
    flask --app webapp init-db --no-demo  ... and never the demo catalogue

Production starts with no products of ours: its catalogue is the shop's own.
"""

from __future__ import annotations

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert as pg_insert

from .db import sessions, upgrade
from .models import Product

__all__ = ["CATALOGUE", "init_app", "seed"]

#: The demo catalogue (scripts/run, the tests, the benchmark).
CATALOGUE = [
    {"sku": "MUG-STONE", "name": "Stoneware mug", "price_cents": 1800,
     "description": "Hand-glazed, 350 ml, dishwasher safe."},
    {"sku": "TEA-SENCHA", "name": "Sencha green tea, 100 g", "price_cents": 1250,
     "description": "First flush, loose leaf."},
    {"sku": "POT-CAST", "name": "Cast-iron teapot", "price_cents": 6400,
     "description": "0.8 l, enamel lined, with infuser."},
    {"sku": "SET-COASTER", "name": "Cork coasters, set of 4", "price_cents": 900,
     "description": "Natural cork, 10 cm."},
]


def init_app(app: Flask) -> None:
    app.cli.add_command(init_db_command)


def seed(engine: Engine) -> None:
    """Insert the demo catalogue; products that exist are left as they are."""
    with engine.begin() as connection:
        connection.execute(
            pg_insert(Product).on_conflict_do_nothing(index_elements=["sku"]),
            [{**item, "active": True} for item in CATALOGUE],
        )


@click.command("init-db")
@click.option("--demo/--no-demo", default=None,
              help="Add the demo catalogue (default: only in development and testing).")
@with_appcontext
def init_db_command(demo: bool | None) -> None:
    """Apply the migrations, and add the demo catalogue if asked (safe to run twice)."""
    if demo is None:
        demo = current_app.config["APP_ENV"] != "production"
    engine = sessions().kw["bind"]
    upgrade(engine)
    if demo:
        seed(engine)
        click.echo("Database is at the latest migration; demo catalogue seeded.")
    else:
        click.echo("Database is at the latest migration; no demo catalogue "
                   "(init-db --demo adds it).")
