"""The shop behind PgBouncer pooling by transaction (Debian's 1.18, its defaults, 4 server
connections): one client's transactions run on whichever server connection is free, so
nothing may outlive a transaction on one of them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from dev.embedded import free_port
from flask_submit_once._runner import Lease
from tests.conftest import order_count
from tests.orders.test_race import DUPLICATES, storm
from tests.support.deploy_machine import rooted, section_blocks
from tests.support.live import ROOT, LiveServer, Response, open_form, request
from tests.support.payments import PAYS
from tests.support.pgbouncer import PgBouncer
from webapp.db import TIMEOUTS, make_engine
from webapp.refunds.settings import WorkerSettings
from webapp.refunds.worker import database_pool
from webapp.shop.models import Order, Product

DEPLOY = ROOT / "docs" / "DEPLOY.md"
#: Forms in a card-checkout storm, how many times each is sent at once, and how many storms
#: one app serves: psycopg prepares a statement on its sixth run on a connection, so a
#: shop that has served a while prepares the most.
FORMS, COPIES, STORMS = 8, 16, 3


@pytest.fixture(scope="module")
def lenient_pgbouncer(servers):
    """PgBouncer as operators often set it to get past its refusal of the timeouts sent when
    connecting (ignore_startup_parameters = options): it takes them, and drops them."""
    with PgBouncer(servers.postgres, ignore_startup_parameters="options") as started:
        yield started


@pytest.fixture
def pooled_engine(pgbouncer):
    """The shop's engine as it is made behind PgBouncer (webapp.db.make_engine)."""
    engine = make_engine(pgbouncer.url("webapp_test"), "transaction")
    yield engine
    engine.dispose()


def flask(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``flask --app webapp ...`` with the test servers' settings and ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", *args],
        cwd=ROOT,
        env={**os.environ, "APP_ENV": "testing", "SECRET_KEY": "test-secret", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def card_storm(port: int, name: str) -> list[Response]:
    """FORMS card-checkout forms (customers ``<name> <n>``), each submitted COPIES times
    at once, every copy on a connection of its own, all of them let go together."""
    sends = []
    for n in range(FORMS):
        cookie, form = open_form(port)
        sends += [(cookie, {**form, "name": f"{name} {n}", "card": PAYS})] * COPIES
    together = threading.Barrier(len(sends))

    def send(cookie_and_form: tuple[str, dict[str, str]]) -> Response:
        cookie, form = cookie_and_form
        together.wait(timeout=60)
        return request(port, "POST", "/orders", cookie=cookie, form=form, timeout=60)

    with ThreadPoolExecutor(len(sends)) as pool:
        return list(pool.map(send, sends))


def test_fifty_concurrent_posts_of_one_form_through_pgbouncer_make_one_order_and_land_on_it(
    servers, pgbouncer
):
    # No card step: the submit's lock is the transaction's own (pg_advisory_xact_lock).
    with LiveServer(
        servers,
        workers=4,
        threads=16,
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
    ) as live:
        cookie, form = open_form(live.port)
        answers = storm(live.port, cookie, form)
        output = live.output()
    assert [answer.status for answer in answers] == [303] * DUPLICATES, output[-3000:]
    assert len({answer.headers["location"] for answer in answers}) == 1
    assert order_count(servers) == 1


def test_a_card_checkout_storm_through_pgbouncer_places_and_charges_each_form_once(
    servers, pgbouncer, provider
):
    with LiveServer(
        servers,
        workers=4,
        threads=8,
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
        **provider.env(),
    ) as live:
        answers = [
            answer for storm in range(STORMS) for answer in card_storm(live.port, f"Storm {storm}")
        ]
        output = live.output()
    statuses = Counter(answer.status for answer in answers)
    with servers.engine.connect() as conn:
        orders = conn.execute(
            text("SELECT customer_name, status, payment_reference, charge_id FROM orders")
        ).all()
        idle_in_transaction = conn.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'")
        )
    # A repeat that waits for the card step's lease past SUBMIT_ONCE_WAIT_SECONDS (a machine
    # this loaded may be that slow) answers "still running" (503), the one 5xx allowed.
    still_running = statuses.pop(503, 0)
    assert statuses == {303: STORMS * FORMS * COPIES - still_running}, output[-3000:]
    assert outcomes_of(output, status=503) == ["still_running"] * still_running
    assert "prepared statement" not in output
    assert Counter(name for name, *_ in orders) == {
        f"Storm {storm} {n}": 1 for storm in range(STORMS) for n in range(FORMS)
    }
    for name, status, reference, charge_id in orders:
        charges = provider.succeeded(reference)
        assert [charge["id"] for charge in charges] == [charge_id], name
        assert status == "paid", name
    assert idle_in_transaction == 0


def outcomes_of(output: str, *, status: int) -> list[str]:
    """The outcomes the app logged for its answers of ``status``."""
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [
        line.get("outcome", "")
        for line in lines
        if line.get("logger") == "webapp.requests" and line.get("status") == status
    ]


@pytest.mark.parametrize("bouncer", ["pgbouncer", "lenient_pgbouncer"])
def test_an_app_told_nothing_of_the_pooler_does_not_start_and_names_the_setting(
    servers, request, bouncer
):
    through = request.getfixturevalue(bouncer)
    settings = {"DATABASE_URL": through.url("webapp_test"), "REDIS_URL": servers.redis.url}
    gunicorn = subprocess.run(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:webapp.gunicorn_conf",
            "webapp:create_app()",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            **settings,
            "APP_ENV": "testing",
            "SECRET_KEY": "test-secret",
            "BIND": f"127.0.0.1:{free_port()}",
            "WEB_CONCURRENCY": "1",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gunicorn.returncode != 0
    assert "set DATABASE_POOLER=transaction when it pools by transaction" in gunicorn.stderr
    # A command stops at its first connection.
    command = flask("init-db", **settings)
    assert command.returncode != 0
    assert "set DATABASE_POOLER=transaction when it pools by transaction" in command.stderr
    told = flask("init-db", DATABASE_POOLER="transaction", **settings)
    assert told.returncode == 0, told.stderr
    assert "Database is at the latest migration" in told.stdout


def test_each_transaction_through_pgbouncer_bounds_its_own_waits_and_leaves_no_setting_behind(
    pooled_engine, pgbouncer
):
    with pooled_engine.connect() as conn:
        shown = {name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in TIMEOUTS}
        conn.rollback()
    assert shown == TIMEOUTS
    # The server connections PgBouncer lends next (the one just used first) have their own.
    with psycopg.connect(pgbouncer.conninfo("webapp_test"), autocommit=True) as conn:
        left = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in TIMEOUTS}
    assert left == dict.fromkeys(TIMEOUTS, "0")


@pytest.mark.parametrize("report", ["payments reconcile", "refunds reconcile"])
def test_the_reports_read_one_snapshot_through_pgbouncer(servers, pgbouncer, report):
    # Its isolation level is asked as the transaction begins, before the timeouts.
    done = flask(
        *report.split(),
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
        REDIS_URL=servers.redis.url,
    )
    assert done.returncode == 0, done.stderr


def test_the_refund_workers_transactions_through_pgbouncer_bound_their_own_waits(
    servers, pgbouncer
):
    settings = WorkerSettings.from_environ(
        {
            "APP_ENV": "testing",
            "DATABASE_URL": pgbouncer.url("webapp_test"),
            "DATABASE_POOLER": "transaction",
            "REDIS_URL": servers.redis.url,
            "REFUND_LOCK_TIMEOUT_MS": "1234",
        }
    )

    async def shown() -> tuple[str, str]:
        async with database_pool(settings) as pool, pool.connection() as conn:
            async with conn.transaction():
                inside = await (await conn.execute("SHOW lock_timeout")).fetchone()
            outside = await (await conn.execute("SHOW lock_timeout")).fetchone()
        return inside[0], outside[0]

    # In a thread of its own: a browser test earlier in this process may have left an
    # event loop set on the main thread (Playwright's sync API runs one there).
    with ThreadPoolExecutor(1) as thread:
        assert thread.submit(asyncio.run, shown()).result() == ("1234ms", "0")


def test_deploys_commands_behind_pgbouncer_migrate_a_new_database_through_it(
    servers, pgbouncer, tmp_path
):
    (commands,) = section_blocks(DEPLOY, "Behind PgBouncer")
    servers.postgres.create_database("deployed_behind_pgbouncer")
    env = tmp_path / "etc" / "shop" / "env"
    env.parent.mkdir(parents=True)
    # What the walk-through left there, on the test servers.
    env.write_text(
        f"APP_ENV=testing\nSECRET_KEY=test-secret\nREDIS_URL={servers.redis.url}\n"
        f"DATABASE_URL={servers.postgres.url('deployed_behind_pgbouncer')}\n"
    )
    script = rooted(commands, tmp_path).replace(
        f"{tmp_path}/srv/shop/venv/bin", os.path.dirname(sys.executable)
    )
    for port, server in (("6432", pgbouncer), ("5432", servers.postgres)):
        old = f"shop:$db_password@localhost:{port}/shop"
        assert old in script, f"DEPLOY.md's PgBouncer commands changed shape: no {old!r}"
        script = script.replace(
            old, f"postgres:$db_password@127.0.0.1:{server.port}/deployed_behind_pgbouncer"
        )
    # init-db is safe to run twice
    for _ in range(2):
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env={**os.environ, "db_password": servers.postgres.password or ""},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        assert "Database is at the latest migration" in ran.stdout
    settings = env.read_text()
    assert settings.count("DATABASE_URL=") == 1 and f":{pgbouncer.port}/" in settings
    versions = []
    for database in ("webapp_test", "deployed_behind_pgbouncer"):
        with psycopg.connect(servers.postgres.conninfo(database)) as conn:
            versions += conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert versions[0] == versions[1]


#: How long the lease of the holder killed lasts: renewed every third of it while the holder
#: lives, it runs out this long after the kill.
LEASE_SECONDS = 1.0


@pytest.fixture
def order_to_charge(servers) -> str:
    """The digest of an order whose card charge is still to do, as a submit leaves it."""
    digest = "lease-test-" + "0" * 32
    with Session(servers.engine) as db:
        product = db.scalars(select(Product).order_by(Product.id)).first()
        assert product is not None
        db.add(
            Order(
                product_id=product.id,
                quantity=1,
                unit_price_cents=product.price_cents,
                customer_name="Lease Holder",
                email="lease@example.com",
                shipping_address="1 Lease Road",
                submission_digest=digest,
                submission_step="charge",
            )
        )
        db.commit()
    return digest


def lease_of(pooled_engine, digest: str, seconds: float = 30.0) -> Lease:
    """A holder's lease of the order's card charge, as the library's step takes it."""
    return Lease(pooled_engine, Order, digest, "charge", seconds)


def held_leases(servers) -> list[tuple[str, datetime]]:
    """(owner, until) of every order's lease held (read straight from PostgreSQL)."""
    with servers.engine.connect() as conn:
        return [
            (owner, until)
            for owner, until in conn.execute(
                select(Order.submission_step_lease_owner, Order.submission_step_lease_until).where(
                    Order.submission_step_lease_owner.is_not(None)
                )
            )
        ]


def test_the_steps_lease_has_one_holder_through_pgbouncer(servers, pooled_engine, order_to_charge):
    # Sixteen holders at once, each on a client connection of its own, PgBouncer lending
    # its four server connections to their transactions in turn.
    holders = [lease_of(pooled_engine, order_to_charge) for _ in range(16)]
    together = threading.Barrier(len(holders))

    def take(holder: Lease) -> bool:
        together.wait(timeout=30)
        return holder.take(wait=0)

    with ThreadPoolExecutor(len(holders)) as pool:
        taken = list(pool.map(take, holders))
    assert taken.count(True) == 1, taken
    (holder,) = [holder for holder, got in zip(holders, taken, strict=True) if got]
    assert [owner for owner, _ in held_leases(servers)] == [holder.owner]
    # PgBouncer lends the server connection freed last: the one that took the lease.
    assert not lease_of(pooled_engine, order_to_charge).take(wait=0)
    holder.release()


def test_the_steps_lease_is_released_through_pgbouncer(servers, pooled_engine, order_to_charge):
    holder = lease_of(pooled_engine, order_to_charge)
    assert holder.take(wait=0)
    with pooled_engine.connect() as other:
        # Another client's transaction on the server connection that took the lease.
        other.execute(text("SELECT 1"))
        holder.release()
    assert held_leases(servers) == []
    nxt = lease_of(pooled_engine, order_to_charge)
    started = time.monotonic()
    assert nxt.take(wait=10) and time.monotonic() - started < 0.5
    nxt.release()


#: A process that takes the step's lease through the shop's engine behind PgBouncer, says
#: so, and renews it until it is killed, as a gunicorn worker killed in a card charge.
HOLD_THE_LEASE = """
import sys, time
from flask_submit_once._runner import Lease
from webapp.db import make_engine
from webapp.shop.models import Order
engine = make_engine(sys.argv[1], "transaction")
lease = Lease(engine, Order, sys.argv[2], "charge", float(sys.argv[3]))
assert lease.take(wait=0)
with lease.kept():
    print("leased", flush=True)
    time.sleep(600)
"""


def test_the_steps_lease_of_a_killed_holder_is_taken_once_it_runs_out_through_pgbouncer(
    servers, pgbouncer, pooled_engine, order_to_charge
):
    holder = subprocess.Popen(
        [
            *(sys.executable, "-c", HOLD_THE_LEASE),
            *(pgbouncer.url("webapp_test"), order_to_charge, str(LEASE_SECONDS)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "leased\n"
        ((owner, until),) = held_leases(servers)
        # Alive, it keeps the lease past its length.
        time.sleep(LEASE_SECONDS * 1.5)
        assert not lease_of(pooled_engine, order_to_charge).take(wait=0)
        ((still, later),) = held_leases(servers)
        assert still == owner and later > until
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    nxt = lease_of(pooled_engine, order_to_charge)
    started = time.monotonic()
    assert nxt.take(wait=10 * LEASE_SECONDS)
    # Taken once the dead holder's lease ran out (at most its length), not later.
    assert time.monotonic() - started < LEASE_SECONDS + 1
    assert [owner for owner, _ in held_leases(servers)] == [nxt.owner]
    nxt.release()
