"""Migrating the test database by hand: an alembic config on a connection, and orders
inserted as an older release wrote them (before the columns later migrations add)."""

from __future__ import annotations

from alembic.config import Config
from sqlalchemy import Connection, text

from webapp.db import MIGRATIONS


def alembic_config(conn: Connection) -> Config:
    """Alembic's config for the shop's migrations, running on ``conn``'s transaction."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def insert_old_orders(conn: Connection, count: int = 50) -> None:
    """``count`` orders with only the columns every release since 0001 has."""
    conn.execute(
        text(
            "INSERT INTO orders (public_id, submission_digest, product_id, quantity, "
            "unit_price_cents, customer_name, email, shipping_address) "
            "SELECT left(md5(i::text), 22), md5(i::text), 1, 1, 1800, 'Ada', 'a@b.c', 'L' "
            "FROM generate_series(1, :count) i"
        ),
        {"count": count},
    )
