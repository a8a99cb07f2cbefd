"""PostgreSQL: one engine per app, short sessions, migrations and seed data."""

from __future__ import annotations

from pathlib import Path

import click
from alembic import command
from alembic.config import Config
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import Engine, create_engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session, sessionmaker

from .models import Product

MIGRATIONS = Path(__file__).with_name("migrations")

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


def make_engine(url: str) -> Engine:
    """An engine whose waits are bounded: a stuck lock or a dead server costs
    seconds, never a hung worker."""
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        pool_timeout=5,
        # Error messages (and so logs) carry no customer data or token digests.
        hide_parameters=True,
        connect_args={
            "connect_timeout": 3,
            "options": "-c lock_timeout=5s -c statement_timeout=15s"
                       " -c idle_in_transaction_session_timeout=30s",
        },
    )


def init_app(app: Flask) -> None:
    engine = make_engine(app.config["DATABASE_URL"])
    app.extensions["db"] = sessionmaker(engine, expire_on_commit=False)
    app.cli.add_command(init_db_command)


def sessions() -> sessionmaker[Session]:
    """The app's session factory; use as ``with sessions()() as db:``."""
    try:
        return current_app.extensions["db"]
    except KeyError:
        raise RuntimeError("webapp.db.init_app(app) was not called.") from None


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration (idempotent)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")


def seed(engine: Engine) -> None:
    """Insert the demo catalogue; products that exist are left as they are."""
    with engine.begin() as connection:
        connection.execute(
            pg_insert(Product).on_conflict_do_nothing(index_elements=["sku"]),
            [{**item, "active": True} for item in CATALOGUE],
        )


@click.command("init-db")
@with_appcontext
def init_db_command() -> None:
    """Apply the migrations and seed the catalogue (safe to run twice)."""
    engine = sessions().kw["bind"]
    upgrade(engine)
    seed(engine)
    click.echo("Database is at the latest migration; catalogue seeded.")


__all__ = ["CATALOGUE", "init_app", "make_engine", "seed", "sessions", "upgrade"]
