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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from sqlalchemy import text

from dev.embedded import free_port
from flask_submit_once._runner import _locked, _unlock, lock_key
from tests.conftest import order_count
from tests.deploy_machine import rooted, section_blocks
from tests.live import ROOT, LiveServer, Response, open_form, request
from tests.payments import PAYS, Provider
from tests.pgbouncer import PgBouncer
from tests.refunds.conftest import wait_until
from tests.test_race import DUPLICATES, storm
from webapp.db import TIMEOUTS, make_engine
from webapp.refunds.settings import WorkerSettings
from webapp.refunds.worker import database_pool

DEPLOY = ROOT / "docs" / "DEPLOY.md"
#: Forms in a card-checkout storm, how many times each is sent at once, and how many storms
#: one app serves: psycopg prepares a statement on its sixth run on a connection, so a
#: shop that has served a while prepares the most.
FORMS, COPIES, STORMS = 8, 16, 3


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    with Provider(tmp_path_factory.mktemp("provider") / "journal.jsonl") as started:
        yield started


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
    # The library's card step still holds its lock for the session, on a server connection
    # PgBouncer lends to others: a repeat that cannot get it past SUBMIT_ONCE_WAIT_SECONDS
    # answers "still running" (503), the one 5xx the shop cannot prevent
    # (test_the_steps_lock_has_one_holder_through_pgbouncer).
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


@pytest.mark.parametrize("report", ["reconcile-payments", "reconcile-refunds"])
def test_the_reports_read_one_snapshot_through_pgbouncer(servers, pgbouncer, report):
    # Its isolation level is asked as the transaction begins, before the timeouts.
    done = flask(
        report,
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


#: What the library's external step needs, and does not get behind a pooler by transaction.
SESSION_LOCK = (
    "the library's step lock (flask_submit_once/_runner.py) is pg_try_advisory_lock, held by "
    "the session across transactions; behind a pooler by transaction the session is a server "
    "connection PgBouncer lends to the next transaction of any client"
)


def advisory_locks(servers, key: int) -> list[int]:
    """The server processes holding advisory lock ``key`` (read straight from PostgreSQL)."""
    with servers.engine.connect() as conn:
        return conn.scalars(
            text(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND ((classid::bigint << 32) | objid::bigint) = :key"
            ),
            {"key": key},
        ).all()


@pytest.mark.xfail(strict=True, reason=SESSION_LOCK + ": the next client's lock lands on it")
def test_the_steps_lock_has_one_holder_through_pgbouncer(servers, pooled_engine):
    key = lock_key("one holder")
    first = _locked(pooled_engine, key, wait=0)
    assert first is not None
    # PgBouncer lends the server connection freed last: the one that took the lock.
    second = _locked(pooled_engine, key, wait=0)
    for holder in (first, second):
        if holder is not None:
            _unlock(holder, key)
            holder.close()
    assert second is None, "a second holder got the lock while the first held it"


@pytest.mark.xfail(strict=True, reason=SESSION_LOCK + ": the unlock runs on another one")
def test_the_steps_lock_is_released_through_pgbouncer(servers, pooled_engine):
    key = lock_key("released")
    holder = _locked(pooled_engine, key, wait=0)
    assert holder is not None
    with pooled_engine.connect() as other:
        # Another client's transaction on the server connection that took the lock.
        other.execute(text("SELECT 1"))
        _unlock(holder, key)
        holder.close()
    left = advisory_locks(servers, key)
    assert left == [], f"the lock is still held by server process {left}, a holder lost"


#: A process that takes the step's lock through the shop's engine behind PgBouncer, says so,
#: and waits to be killed, as a gunicorn worker killed in the middle of a card charge.
HOLD_THE_LOCK = """
import sys, time
from flask_submit_once._runner import _locked
from webapp.db import make_engine
engine = make_engine(sys.argv[1], "transaction")
assert _locked(engine, int(sys.argv[2]), wait=0) is not None
print("locked", flush=True)
time.sleep(600)
"""


@pytest.mark.xfail(strict=True, reason=SESSION_LOCK + ": a holder killed leaves it held")
def test_the_steps_lock_of_a_killed_holder_is_freed_through_pgbouncer(servers, pgbouncer):
    key = lock_key("killed holder")
    url = pgbouncer.url("webapp_test") + "?application_name=killed-holder"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, url, str(key)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    # Once PgBouncer has seen its client go, that client's session is over.
    wait_until(
        lambda: (
            "killed-holder"
            not in {client["application_name"] for client in pgbouncer.admin("SHOW CLIENTS")}
        ),
        what="PgBouncer to see the killed client go",
    )
    left = advisory_locks(servers, key)
    assert left == [], f"the lock is still held by server process {left}, its holder dead"
