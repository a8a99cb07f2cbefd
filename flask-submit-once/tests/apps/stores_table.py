"""What each database answers under the library's promises, as one table::

    cd flask-submit-once && python tests/apps/stores_table.py [--forms 4] [--duplicates 20]

Starts its own servers (servers.py: Redis, PostgreSQL, Debian's PgBouncer pooling by
transaction in front of it, Debian's MariaDB; a SQLite file in WAL mode) and runs on each
store, on a database of its own: a form storm (``--forms`` renderings, each sent
``--duplicates`` times at once over HTTP), an in-flight storm (the first submit held inside
its transaction until every duplicate has reached the app), a resurrected token (the spent
token written back into Redis and sent by another worker, then Redis flushed and sent
again), a killed worker (SIGKILL after the GETDEL, inside the transaction; then the user's
resubmit) and the external step's storm (``then=``, a card charged once; refused on
SQLite). Each cell: the answers by status, the rows made, and the connections left idle in
a transaction afterwards (PostgreSQL: pg_stat_activity, straight to the server; MariaDB:
information_schema.innodb_trx; SQLite: whether the writer lock is free). Not a test: a
report for people, which the tests (test_race.py, test_redis_loss.py, test_worker_killed.py,
test_steps.py, test_sqlite.py, test_mariadb.py) hold in assertions.
"""

from __future__ import annotations

import argparse
import http.client
import signal
import sqlite3
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import sessionmaker

import checkout_app
import signup_app
import storm_app
from flask_submit_once import signals
from flask_submit_once.testing import OnceForms
from live import Browser, hidden, serve, signup_worker
from servers import (
    MariaDBServer,
    PgBouncer,
    PostgresServer,
    RedisServer,
    mariadb_missing,
    pgbouncer_missing,
)

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}
CHECKOUT = {"email": "ada@example.com", "cents": "1250"}
POOL = {"pool_size": 10, "max_overflow": 10, "pool_timeout": 30}


class Store:
    """One store: the URL the app uses, and how to count what is left held."""

    def __init__(self, name: str, url: str, observer: str, **engine: Any) -> None:
        self.name, self.url, self.observer, self.engine_options = name, url, observer, engine

    def engine(self, **pool: Any) -> Engine:
        return create_engine(self.url, **self.engine_options, **pool)

    def left_held(self) -> str:
        """Connections idle in a transaction (SQLite: whether the writer lock is free)."""
        if self.url.startswith("sqlite"):
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=0)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
                return "lock free"
            except sqlite3.OperationalError as error:
                return f"lock held ({error})"
            finally:
                conn.close()
        engine = create_engine(self.observer)
        with engine.connect() as conn:
            if self.url.startswith("mariadb"):
                count = conn.scalar(text("SELECT count(*) FROM information_schema.innodb_trx"))
            else:
                count = conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND state LIKE 'idle in transaction%' "
                        "AND pid <> pg_backend_pid()"
                    )
                )
        engine.dispose()
        return f"{count} idle in tx"


def statuses(codes: list[int | str]) -> str:
    return ", ".join(f"{n} × {code}" for code, n in sorted(Counter(map(str, codes)).items()))


def fives(codes: list[int | str]) -> int:
    return sum(1 for code in codes if str(code).startswith("5"))


def count_rows(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table)) or 0)


def form_storm(store: Store, redis_url: str, forms: int, duplicates: int) -> str:
    engine = store.engine()
    storm_app.Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(storm_app.Topic.__table__.insert().values(id=1, name="tea"))
    app, close = storm_app.create_app(
        "sessionmaker", store.url, redis_url, {**POOL, **store.engine_options}
    )
    try:
        with serve(app) as port:
            browsers = [Browser(port) for _ in range(forms)]
            tokens = [hidden(b.get("/").body, "form_token") for b in browsers]
            sends = [(n, d) for n in range(forms) for d in range(duplicates)]
            start = threading.Barrier(len(sends))
            codes: list[int | str] = [0] * len(sends)

            def send(i: int) -> None:
                form = sends[i][0]
                tab = Browser(port, dict(browsers[form].cookies))
                start.wait()
                try:
                    codes[i] = tab.post(
                        "/entries", {"form_token": tokens[form], "topic": "1"}
                    ).status
                except (OSError, http.client.HTTPException) as error:
                    codes[i] = type(error).__name__

            threads = [threading.Thread(target=send, args=(i,)) for i in range(len(sends))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
    finally:
        close()
    rows = count_rows(engine, storm_app.Entry.__table__)
    engine.dispose()
    return (
        f"{statuses(codes)}; {rows} rows / {forms} forms; {fives(codes)} × 5xx; {store.left_held()}"
    )


@contextmanager
def signup(store: Store, redis_url: str, **pool: Any) -> Iterator[tuple[Any, Engine]]:
    engine = store.engine(**pool)
    signup_app.Base.metadata.create_all(engine)
    with engine.begin() as conn:
        for table in reversed(signup_app.Base.metadata.sorted_tables):
            conn.execute(table.delete())
    app = signup_app.create_app(sessionmaker(engine), REDIS_URL=redis_url)
    try:
        yield app, engine
    finally:
        with app.app_context():
            signup_app.submit_once.redis.close()
        engine.dispose()


def in_flight_storm(store: Store, redis_url: str, duplicates: int) -> str:
    with signup(store, redis_url, **POOL) as (app, engine):
        entered: list[str] = []
        arrived = threading.Condition()
        taken, all_in = threading.Event(), threading.Event()

        def counting(wsgi: Any) -> Any:
            def counted(environ: Any, start_response: Any) -> Any:
                with arrived:
                    entered.append(environ["PATH_INFO"])
                    arrived.notify_all()
                return wsgi(environ, start_response)

            return counted

        def hold(sender: Any, **extra: Any) -> None:
            if not taken.is_set():
                taken.set()
                with arrived:
                    if arrived.wait_for(lambda: len(entered) == duplicates, 30):
                        all_in.set()

        kinds: list[str] = []
        page = OnceForms(app.test_client()).open("/signup")
        app.wsgi_app = counting(app.wsgi_app)  # type: ignore[method-assign]
        with (
            signals.token_consumed.connected_to(hold, sender=app),
            signals.submit_decided.connected_to(
                lambda sender, outcome, **extra: kinds.append(outcome.kind), sender=app
            ),
        ):
            answers = page.submit_concurrently([ADA] * duplicates)
        codes: list[int | str] = [a.status_code for a in answers]
        rows = count_rows(engine, signup_app.Signup)
        decided = ", ".join(f"{n} {kind}" for kind, n in sorted(Counter(kinds).items()))
    held = "held until all were in" if all_in.is_set() else "NOT held until all were in"
    return (
        f"{statuses(codes)} ({decided}; {held}); {rows} row; {fives(codes)} × 5xx; "
        f"{store.left_held()}"
    )


def token_keys(rdb: redis.Redis) -> set[str]:
    return {k for k in rdb.keys("so:*") if not k.startswith("so:issued:")}


def another_worker(make: Callable[[], Any], first: OnceForms) -> Any:
    client = make().test_client()
    client.set_cookie("session", first.client.get_cookie("session").value)
    return client


def resurrected(store: Store, redis_url: str) -> str:
    rdb = redis.Redis.from_url(redis_url, decode_responses=True)
    with signup(store, redis_url) as (app, engine):
        apps = [app]

        def make() -> Any:
            apps.append(signup_app.create_app(sessionmaker(engine), REDIS_URL=redis_url))
            return apps[-1]

        forms = OnceForms(app.test_client())
        page = forms.open("/signup")
        before = token_keys(rdb)
        codes: list[int | str] = [page.submit(ADA).status_code]
        (key,) = before - token_keys(rdb)
        rdb.set(key, 1, ex=60)
        codes.append(page.submit(ADA, client=another_worker(make, forms)).status_code)
        rdb.flushall()
        codes.append(page.submit(ADA, client=another_worker(make, forms)).status_code)
        rows = count_rows(engine, signup_app.Signup)
        for other in apps[1:]:
            with other.app_context():
                signup_app.submit_once.redis.close()
    rdb.close()
    return (
        f"first, token back, Redis flushed: {' / '.join(map(str, codes))}; {rows} row; "
        f"{fives(codes)} × 5xx; {store.left_held()}"
    )


def killed_worker(store: Store, redis_url: str) -> str:
    rdb = redis.Redis.from_url(redis_url, decode_responses=True)
    with signup(store, redis_url) as (app, engine):
        with signup_worker(redis_url, store.url, ADA) as (worker, browser, form):
            issued = len(token_keys(rdb))
            codes: list[int | str] = []

            def submit() -> None:
                try:
                    codes.append(browser.post("/signup/send", form).status)
                except (OSError, http.client.HTTPException) as error:
                    codes.append(type(error).__name__)

            posting = threading.Thread(target=submit)
            posting.start()
            worker.stdout.readline()
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            posting.join(30)
        rows_after_kill = count_rows(engine, signup_app.Signup)
        spent = issued - len(token_keys(rdb))
        held = store.left_held()
        client = app.test_client()
        client.set_cookie("session", browser.cookies["session"])
        reload = client.post("/signup/send", data=form)
        codes.append(reload.status_code)
        fresh = hidden(reload.text, "form_token")
        codes.append(client.post("/signup/send", data={**form, "form_token": fresh}).status_code)
        rows = count_rows(engine, signup_app.Signup)
    rdb.close()
    return (
        f"killed, resubmit, with a fresh token: {' / '.join(map(str, codes))}; "
        f"{rows_after_kill} row after the kill, token spent: {spent == 1}, {held}; "
        f"{rows} row after"
    )


def step_storm(store: Store, redis_url: str, duplicates: int) -> str:
    engine = store.engine(**POOL)
    checkout_app.Base.metadata.create_all(engine)
    provider = checkout_app.Provider()
    app = checkout_app.create_app(sessionmaker(engine), provider, REDIS_URL=redis_url)
    try:
        page = OnceForms(app.test_client()).open("/checkout")
        if store.url.startswith("sqlite"):
            # refused at the first submit, before anything is spent (docs/databases.md)
            try:
                page.submit(CHECKOUT)
            except RuntimeError as error:
                return f'refused: "{error}"'
        answers = page.submit_concurrently([CHECKOUT] * duplicates)
        codes: list[int | str] = [a.status_code for a in answers]
        rows = count_rows(engine, checkout_app.Order)
        charges = sum(provider.calls.values())
    finally:
        with app.app_context():
            checkout_app.submit_once.redis.close()
        engine.dispose()
    return (
        f"{statuses(codes)}; {rows} order, {charges} charge; {fives(codes)} × 5xx; "
        f"{store.left_held()}"
    )


def stores(stack: ExitStack, folder: Path) -> list[Store]:
    """Every store that can run here (the others said on stderr)."""
    postgres = PostgresServer()
    stack.callback(postgres.remove)
    postgres.start()
    made = []
    for name, database in (("PostgreSQL 16", "straight"), ("through PgBouncer", "pooled")):
        postgres.create_database(database)
        made.append(Store(name, postgres.url(database), postgres.url(database)))
    missing = pgbouncer_missing()
    if missing is None:
        pooler = PgBouncer(made[1].url)
        stack.callback(pooler.stop)
        pooler.start()
        # psycopg's advice for PgBouncer before 1.21, as an app behind one must
        made[1] = Store(
            made[1].name,
            pooler.url(),
            made[1].observer,
            connect_args={"prepare_threshold": None},
        )
    else:
        print(f"through PgBouncer left out: {missing}", file=sys.stderr)
        made.pop()
    path = folder / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    made.append(Store("SQLite (WAL)", f"sqlite:///{path}", ""))
    missing = mariadb_missing()
    if missing is None:
        mariadb = MariaDBServer()
        stack.callback(mariadb.remove)
        mariadb.start().create_database("table")
        made.append(Store("MariaDB 10.11", mariadb.url("table"), mariadb.url("table")))
    else:
        print(f"MariaDB left out: {missing}", file=sys.stderr)
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--forms", type=int, default=4)
    parser.add_argument("--duplicates", type=int, default=20)
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stores-table-")))
        store = RedisServer(folder / "redis").start()
        stack.callback(store.kill)
        made = stores(stack, folder)
        scenarios: dict[str, Callable[[Store], str]] = {
            f"form storm ({args.forms} forms × {args.duplicates} at once)": lambda s: form_storm(
                s, store.url, args.forms, args.duplicates
            ),
            f"in-flight storm ({args.duplicates}, the first held)": lambda s: in_flight_storm(
                s, store.url, args.duplicates
            ),
            "resurrected token": lambda s: resurrected(s, store.url),
            "killed worker (SIGKILL after GETDEL)": lambda s: killed_worker(s, store.url),
            f"external step storm ({args.duplicates} at once)": lambda s: step_storm(
                s, store.url, args.duplicates
            ),
        }
        print(f"| scenario | {' | '.join(s.name for s in made)} |")
        print(f"|---|{'---|' * len(made)}")
        for scenario, run in scenarios.items():
            cells = []
            for one in made:
                try:
                    cells.append(run(one))
                # a row of the table, not a traceback
                except Exception as error:
                    cells.append(f"ERROR {type(error).__name__}: {error}")
            print(f"| {scenario} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
