"""PostgreSQL: one engine per app, short sessions, migrations (init-db: webapp/cli.py)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from flask import Flask, current_app
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).with_name("migrations")


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


__all__ = ["MIGRATIONS", "init_app", "make_engine", "sessions", "upgrade"]
