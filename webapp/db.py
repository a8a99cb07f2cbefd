"""PostgreSQL: one engine per app, short sessions, migrations (init-db: webapp/cli.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from flask import Flask, current_app
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).with_name("migrations")

#: Every wait is bounded: a stuck lock or a dead server costs seconds, never a hung worker.
TIMEOUTS = {
    "lock_timeout": "5s",
    "statement_timeout": "15s",
    "idle_in_transaction_session_timeout": "30s",
}
#: What stops the app (and the refund worker) at its first connection through a pooler
#: that DATABASE_POOLER (webapp/config.py) does not name.
POOLER_NOT_SET = (
    "DATABASE_URL reaches PostgreSQL through a connection pooler (PgBouncer or another), "
    "and DATABASE_POOLER does not say so: set DATABASE_POOLER=transaction when it pools by "
    "transaction (PgBouncer's pool_mode = transaction, as most hosted PostgreSQL), or "
    "DATABASE_POOLER=session when it pools by session (docs/DEPLOY.md, Behind PgBouncer)."
)


def make_engine(url: str, pooler: str = "none") -> Engine:
    """An engine whose waits are bounded (TIMEOUTS), fit for ``pooler`` (``DATABASE_POOLER``).

    Straight to PostgreSQL the timeouts are the session's, sent when connecting. Behind a
    pooler they cannot be: PgBouncer refuses settings sent when connecting, and a session
    setting would stay on a server connection that other clients go on to use. So each
    transaction sets its own (``SET LOCAL``), one statement as it begins. Behind a pooler by
    transaction psycopg prepares no statement: a prepared statement lives on the server
    connection it was prepared on, and the client's next transaction may run on another
    (psycopg's advice for PgBouncer: ``prepare_threshold=None``).
    """
    connect_args: dict[str, Any] = {"connect_timeout": 3}
    if pooler == "none":
        connect_args["options"] = " ".join(f"-c {name}={value}" for name, value in TIMEOUTS.items())
    if pooler == "transaction":
        connect_args["prepare_threshold"] = None
    engine = create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        pool_timeout=5,
        # Error messages (and so logs) carry no customer data or token digests.
        hide_parameters=True,
        connect_args=connect_args,
    )
    if pooler == "none":
        event.listen(engine, "first_connect", _refuse_unnamed_pooler)
        event.listen(engine, "handle_error", _name_the_pooler_setting)
    else:
        event.listen(engine, "begin", _bound_the_transaction)
    return engine


_SET_LOCAL_TIMEOUTS = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', true)" for name, value in TIMEOUTS.items()
)


def _bound_the_transaction(connection) -> None:
    connection.exec_driver_sql(_SET_LOCAL_TIMEOUTS)


def _refuse_unnamed_pooler(dbapi_connection, _record) -> None:
    if behind_a_pooler(dbapi_connection):
        raise RuntimeError(POOLER_NOT_SET)


def behind_a_pooler(dbapi_connection: psycopg.Connection) -> bool:
    """Whether a pooler stands between this connection and PostgreSQL. A pooler answers the
    client with a cancel key, and so a backend process id, of its own making (it must: the
    server process behind the client changes), never that of the process serving it."""
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        row = cursor.fetchone()
    dbapi_connection.rollback()
    return row is None or row[0] != dbapi_connection.info.backend_pid


def libpq_url(url: str) -> str:
    """``DATABASE_URL`` as libpq (psycopg) takes it, not in SQLAlchemy's "+psycopg" form."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def refuse_unnamed_pooler(url: str, pooler: str) -> None:
    """The start-up check (gunicorn's on_starting, the refund worker): RuntimeError naming
    DATABASE_POOLER when ``url`` leads through a pooler ``pooler`` does not name. With
    PostgreSQL away there is nothing to say: the app answers its outage page meanwhile."""
    if pooler != "none":
        return
    try:
        with psycopg.connect(
            libpq_url(url), connect_timeout=3, options="-c statement_timeout=15s"
        ) as conn:
            if behind_a_pooler(conn):
                raise RuntimeError(POOLER_NOT_SET)
    except psycopg.OperationalError as error:
        if "unsupported startup parameter" in str(error):
            raise RuntimeError(POOLER_NOT_SET) from None


def _name_the_pooler_setting(context: ExceptionContext) -> BaseException | None:
    """PgBouncer refuses the timeouts sent when connecting: say which setting fixes it."""
    if "unsupported startup parameter" in str(context.original_exception):
        return RuntimeError(POOLER_NOT_SET)
    return None


def init_app(app: Flask) -> None:
    app.config.setdefault("DATABASE_POOLER", "none")
    engine = make_engine(app.config["DATABASE_URL"], app.config["DATABASE_POOLER"])
    app.extensions["db"] = sessionmaker(engine, expire_on_commit=False)


def sessions() -> sessionmaker[Session]:
    """The app's session factory; use as ``with sessions()() as db:``."""
    try:
        return current_app.extensions["db"]
    except KeyError:
        raise RuntimeError("webapp.db.init_app(app) was not called.") from None


@contextmanager
def snapshot() -> Iterator[Session]:
    """A session in one transaction that reads one consistent snapshot and writes nothing
    (REPEATABLE READ, READ ONLY), for reports that add several tables up. psycopg begins the
    transaction so; a ``SET TRANSACTION`` would come after the timeouts an engine behind a
    pooler sets first, and PostgreSQL refuses it there."""
    with sessions()() as db, db.begin():
        db.connection(
            execution_options={"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
        )
        yield db


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration (idempotent)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")


__all__ = [
    "MIGRATIONS",
    "POOLER_NOT_SET",
    "TIMEOUTS",
    "behind_a_pooler",
    "init_app",
    "libpq_url",
    "make_engine",
    "refuse_unnamed_pooler",
    "sessions",
    "snapshot",
    "upgrade",
]
