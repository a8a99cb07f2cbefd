"""Real PostgreSQL and Redis for the whole session, clean state for every test."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.cookies import SimpleCookie
from pathlib import Path
from typing import TypeVar

import jinja2
import pytest
import redis
from flask import Flask
from flask.json.tag import TaggedJSONSerializer
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from dev.embedded import EmbeddedPostgres, EmbeddedRedis
from flask_submit_once.testing import FormPage, OnceForms
from tests.support.payments import Provider
from tests.support.pgbouncer import PGBOUNCER, PgBouncer, needs_pgbouncer
from webapp import create_app
from webapp.cli import CATALOGUE, seed
from webapp.db import make_engine, upgrade


@dataclass
class Servers:
    postgres: EmbeddedPostgres
    redis: EmbeddedRedis
    engine: Engine

    @property
    def database_url(self) -> str:
        return self.postgres.url("webapp_test")

    def config(self, **overrides: object) -> dict[str, object]:
        return {
            "APP_ENV": "testing",
            "SECRET_KEY": "test-secret",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis.url,
            **overrides,
        }


S = TypeVar("S", bound=Servers)


@contextmanager
def running_servers(base: Path, kind: type[S], *, persist_redis: bool) -> Iterator[S]:
    """A throwaway PostgreSQL (migrated and seeded) and Redis under ``base``."""
    postgres = EmbeddedPostgres(base / "postgres", fast=True, throwaway=True).start()
    store = EmbeddedRedis(base / "redis", persist=persist_redis).start()
    try:
        postgres.create_database("webapp_test")
        engine = make_engine(postgres.url("webapp_test"))
        upgrade(engine)
        seed(engine)
        yield kind(postgres, store, engine)
        engine.dispose()
    finally:
        store.kill()
        postgres.remove()


#: The tables that refer to orders (at any depth), those farthest from it first, and the
#: sequences of all of them: what ``TRUNCATE orders RESTART IDENTITY CASCADE`` empties.
_ORDER_TABLES = text("""
    WITH RECURSIVE refs(rel, depth) AS (
        SELECT 'orders'::regclass, 0
        UNION
        SELECT k.conrelid::regclass, refs.depth + 1 FROM pg_constraint k
        JOIN refs ON k.confrelid = refs.rel WHERE k.contype = 'f' AND k.conrelid <> refs.rel)
    SELECT rel::text, max(depth) AS depth, array(
        SELECT d.objid::regclass::text FROM pg_depend d JOIN pg_sequence q ON q.seqrelid = d.objid
        WHERE d.refobjid = rel AND d.deptype IN ('a', 'i')) AS sequences
    FROM refs GROUP BY rel ORDER BY depth DESC, rel""")
_emptying: dict[str, list[str]] = {}


def empty_orders(conn) -> None:
    """What ``TRUNCATE orders RESTART IDENTITY CASCADE`` does, by DELETE: a TRUNCATE makes
    new files for every table and index (~40 ms a test here), a DELETE of a few rows ~1 ms."""
    url = str(conn.engine.url)
    if url not in _emptying:
        rows = conn.execute(_ORDER_TABLES).all()
        _emptying[url] = [f"DELETE FROM {table}" for table, _, _ in rows] + [
            f"ALTER SEQUENCE {sequence} RESTART"
            for _, _, sequences in rows
            for sequence in sequences
        ]
    for attempt in range(3):
        try:
            with conn.begin_nested():
                for statement in _emptying[url]:
                    conn.execute(text(statement))
            return
        except IntegrityError:
            # A refund worker the test before started wrote a row that refers to an order
            # between two DELETEs (CI saw it once): empty them all again.
            if attempt == 2:
                raise


def reset_state(servers: Servers) -> None:
    """No orders, empty Redis, the seeded catalogue on sale at its seeded prices."""
    with servers.engine.begin() as conn:
        empty_orders(conn)
        conn.execute(text("UPDATE products SET active = true"))
        # a test that changed a price leaves it changed otherwise
        for product in CATALOGUE:
            conn.execute(
                text("UPDATE products SET price_cents = :price WHERE sku = :sku"),
                {"price": product["price_cents"], "sku": product["sku"]},
            )
    with redis.Redis.from_url(servers.redis.url) as client:
        client.flushall()


class CompiledTemplates(jinja2.BytecodeCache):
    """Templates compiled once a test process, not once an app: each test builds its own
    app, whose first page compiled every template it used (~20 ms a test). Keyed by the
    template's name and source, so an edited template is compiled again."""

    def __init__(self) -> None:
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


TEMPLATES_COMPILED = CompiledTemplates()


@contextmanager
def app_factory(servers: Servers) -> Iterator[Callable[..., Flask]]:
    """``make(**overrides)`` builds an app on ``servers``; pools are closed afterwards."""
    apps: list[Flask] = []

    def make(**overrides: object) -> Flask:
        app = create_app(servers.config(**overrides))
        app.jinja_env.bytecode_cache = TEMPLATES_COMPILED
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["db"].kw["bind"].dispose()
        app.extensions["submit_once"].store.client.close()


#: The longest files of the suite, longest first (by ``--durations`` on two busy workers,
#: with the soaks at 12 s). Under ``--dist loadfile`` a file runs whole on one worker, and a long
#: one handed out last keeps the other worker idle until it ends: these go first, the rest
#: (fewer seconds each) after them, the files with most tests first as xdist would order them.
LONGEST_FILES = (
    "tests/deploy/test_wheel.py",
    "tests/failover/test_postgres_failover.py",
    "tests/deploy/test_instances.py",
    "tests/deploy/test_dev_servers.py",
    "tests/deploy/test_control_socket.py",
    "tests/payments/test_charge_kills.py",
    "tests/failover/test_charge_soak.py",
    "tests/browser/test_order_state_widths_in_browser.py",
    "tests/refunds/test_reconcile.py",
    "tests/app/test_per_request_leaks.py",
    "tests/browser/test_submit_outcomes_in_browser.py",
    "tests/deploy/test_bench.py",
    "tests/orders/test_race.py",
    "tests/browser/test_charge_in_browser.py",
    "tests/failover/test_redis_outage_soak.py",
    "tests/browser/test_outage_behind_nginx_in_browser.py",
    "tests/failover/test_sentinel_failover.py",
    "tests/browser/test_submit_in_browser.py",
    "tests/faults/test_postgres_faults.py",
    "tests/deploy/test_behind_nginx.py",
    "tests/orders/test_form_limits.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FILES), then by their number of tests. Needs
    ``--no-loadscope-reorder`` (pyproject's addopts) for xdist to keep this order."""
    files = [item.nodeid.split("::", 1)[0] for item in items]
    tests_in = Counter(files)
    first = {name: files.index(name) for name in tests_in}
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    order = sorted(
        range(len(items)),
        key=lambda i: (rank.get(files[i], len(rank)), -tests_in[files[i]], first[files[i]], i),
    )
    items[:] = [items[i] for i in order]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with running_servers(
        tmp_path_factory.mktemp("servers"), Servers, persist_redis=False
    ) as started:
        yield started


@pytest.fixture(scope="session")
def pgbouncer(servers: Servers) -> Iterator[PgBouncer]:
    """Debian's PgBouncer in front of the test PostgreSQL, pooling by transaction with 4
    server connections (Debian's defaults otherwise); skipped where it is not installed."""
    if PGBOUNCER is None:
        pytest.skip(needs_pgbouncer.kwargs["reason"])
    with PgBouncer(servers.postgres, pool_mode="transaction", pool_size=4) as started:
        yield started


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """The dev payment provider, for the tests of one module."""
    with Provider(tmp_path_factory.mktemp("provider") / "journal.jsonl") as started:
        yield started


@pytest.fixture
def no_faults(provider: Provider) -> Iterator[None]:
    """The provider's fault switches off before and after the test."""
    provider.faults()
    yield
    provider.faults()


@pytest.fixture(autouse=True)
def clean_state(request: pytest.FixtureRequest):
    """Before each test that uses the servers: no orders, empty Redis, catalogue on sale.
    After it: every key it left in Redis has a TTL."""
    if "servers" not in request.fixturenames:
        yield
        return
    servers: Servers = request.getfixturevalue("servers")
    reset_state(servers)
    yield
    assert_every_key_expires(servers.redis.url)


def assert_every_key_expires(url: str) -> None:
    """Redis memory is bounded only if every key expires (the README's maxmemory
    policy, volatile-ttl, can evict nothing else). Streams are queues, bounded by
    being consumed and trimmed, not by a TTL, so they are left to their own tests."""
    with redis.Redis.from_url(url, decode_responses=True) as client:
        forever = [
            key
            for key in client.scan_iter(count=1000)
            if client.ttl(key) == -1 and client.type(key) != "stream"
        ]
    assert forever == [], f"keys left without a TTL: {forever[:5]}"


@pytest.fixture
def make_app(servers: Servers):
    """Build an app on the test servers; engines and Redis pools are closed afterwards."""
    with app_factory(servers) as make:
        yield make


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def rdb(servers: Servers) -> redis.Redis:
    client = redis.Redis.from_url(servers.redis.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def stopped_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``stop(second)``: time.time() in this process stays at that second of the current
    hour (until the next stop). What the app counts in windows of the clock (the form
    limits: a minute, the token TTL's hour) or checks against it (a webhook's signed
    time) then does not depend on when in a window the test runs: a minute's last second
    gives Retry-After: 1, and a burst can straddle two windows."""
    hour = int(time.time()) // 3600 * 3600

    def stop(second: int) -> None:
        monkeypatch.setattr(time, "time", lambda: float(hour + second))

    return stop


def order_count(servers: Servers) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM orders"))


def lose_the_commit_reply(monkeypatch, *, committed: bool) -> None:
    """The next COMMIT loses its answer as in a database failover: the connection is
    gone, so the app cannot know whether it landed (it did when ``committed``)."""
    real_commit = Session.commit

    def commit_then_lose_the_reply(self):
        monkeypatch.setattr(Session, "commit", real_commit)
        if committed:
            real_commit(self)
        raise OperationalError(
            "COMMIT", None, Exception("server closed the connection"), connection_invalidated=True
        )

    monkeypatch.setattr(Session, "commit", commit_then_lose_the_reply)


def token_keys(rdb, pattern: str = "*") -> list[str]:
    """The live form tokens among ``rdb``'s keys matching ``pattern``: every key but
    the issuance counts (``so:issued:…``, one per session and client a window)."""
    return [key for key in rdb.keys(pattern) if ":issued:" not in str(key)]


def flashed(response) -> list[str]:
    """The notices a response left for the order's next page (webapp/shop/notices.py): what it
    flashed into the session cookie it sets ([] when it sets none). Read, not verified:
    the signature is the app's business, and tests.support.live responses come without the app."""
    headers = response.headers
    for header in (
        headers.getlist("Set-Cookie")
        if hasattr(headers, "getlist")
        else [headers.get("set-cookie", "")]
    ):
        cookie = SimpleCookie(header)
        if "session" in cookie:
            _, session = SESSION_COOKIE.loads_unsafe(cookie["session"].value)
            return [message for _, message in (session or {}).get("_flashes", [])]
    return []


#: How Flask encodes its session cookie (SecureCookieSessionInterface), minus the key.
SESSION_COOKIE = URLSafeTimedSerializer(
    "unknown", salt="cookie-session", serializer=TaggedJSONSerializer()
)


def order_page(forms: OnceForms) -> FormPage:
    """The checkout's details page, aimed at the submit that places the order: its token
    is the one the review's "Place order" spends, sent here with the fields straight to
    ``POST /orders``, as the review sends them (tests/orders/test_checkout_review.py goes through
    the review)."""
    return replace(forms.open("/orders/new"), url="/orders")


def hidden(html: str, name: str) -> str:
    """The value of the hidden input called ``name`` in a rendered page."""
    match = re.search(rf'name="{name}"[^>]*value="([^"]*)"', html) or re.search(
        rf'value="([^"]*)"[^>]*name="{name}"', html
    )
    assert match, f"no hidden input {name!r} on the page"
    return match.group(1)


VALID = {
    "product": "1",
    "quantity": "2",
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "address": "12 St James's Square\nLondon SW1Y 4JH",
}
