"""The core promises on SQLite, each database a file of the test's own in WAL mode: storms of
duplicates of several forms at once make one row each, a duplicate in flight waits for
the first and lands on its row, a token Redis gives back meets the UNIQUE digest, several
processes share one file, a worker killed inside its transaction frees nothing; and so do
``idempotent()``'s keys, the status check and the refusal of work left in the session. What
SQLite cannot hold (a step outside the database, an in-memory database, an engine that
begins its own transactions) is refused, saying so.

The lock there is the database's one writer lock (``BEGIN IMMEDIATE``), tried without
SQLite's busy handler: a waiter waits in the runner, as on PostgreSQL, holding no
connection. The sign-up app (conftest's ``make_app``, ``once_forms``, ``signups``) runs
on the test's file here: this module's ``sessions`` replaces the suite's.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask, render_template_string
from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

import signup_app
import storm_app
from flask_submit_once import SubmitOnce, signals
from flask_submit_once.testing import OnceForms
from live import Browser, hidden, serve, signup_worker
from servers import free_port

pytestmark = pytest.mark.sqlite

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}
FORMS_AT_ONCE = 4
DUPLICATES = 20
POOL = {"pool_size": 10, "max_overflow": 10, "pool_timeout": 30}
SERVE_STORM = Path(__file__).parent / "apps" / "serve_storm.py"


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlite_url)
    signup_app.Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(sqlite_engine: Engine) -> sessionmaker[Session]:
    """The sign-up app's sessions (conftest's ``make_app``, ``client``, ``once_forms``,
    ``signups``), on this test's SQLite file."""
    return sessionmaker(sqlite_engine)


@pytest.fixture
def storm_tables(sqlite_url: str) -> Iterator[Engine]:
    """The storm app's tables in this test's file, each kind with topic 1."""
    engine = create_engine(sqlite_url)
    for metadata in (storm_app.Base.metadata, storm_app.db.metadata):
        metadata.create_all(engine)
    with engine.begin() as conn:
        for kind in ("sessionmaker", "flask_sqlalchemy"):
            conn.execute(storm_app.models(kind)[0].__table__.insert().values(id=1, name="tea"))
    yield engine
    engine.dispose()


def storms_at_once(ports: list[int], forms: int, duplicates: int) -> list[tuple[str, Any]]:
    """``forms`` renderings of the form (one browser session each), each submitted
    ``duplicates`` times at once, all at the same moment, spread over ``ports`` (the
    processes serving the app); (the rendering's token, the answer) of every submit."""
    browsers = [Browser(ports[0]) for _ in range(forms)]
    tokens = [hidden(browser.get("/").body, "form_token") for browser in browsers]
    sends = [(n, d) for n in range(forms) for d in range(duplicates)]
    start = threading.Barrier(len(sends))

    def send(which: tuple[int, int]) -> tuple[str, Any]:
        form, duplicate = which
        tab = Browser(ports[duplicate % len(ports)], dict(browsers[form].cookies))
        start.wait()
        return tokens[form], tab.post("/entries", {"form_token": tokens[form], "topic": "1"})

    with ThreadPoolExecutor(len(sends)) as pool:
        return list(pool.map(send, sends))


def one_row_each(answers: list[tuple[str, Any]], forms: int) -> None:
    """Every submit a 303, all of one rendering to one place, each rendering its own."""
    assert {answer.status for _, answer in answers} == {303}
    places: dict[str, set[str]] = {}
    for token, answer in answers:
        places.setdefault(token, set()).add(answer.headers["Location"])
    assert all(len(where) == 1 for where in places.values()), places
    assert len({where.pop() for where in places.values()}) == forms


@pytest.mark.parametrize("kind", storm_app.KINDS)
def test_storms_of_duplicates_of_several_forms_at_once_make_one_row_each_on_sqlite(
    storm_tables, sqlite_url, redis_url, kind
):
    app, close = storm_app.create_app(kind, sqlite_url, redis_url, POOL)
    try:
        with serve(app) as port:
            answers = storms_at_once([port], FORMS_AT_ONCE, DUPLICATES)
    finally:
        close()
    one_row_each(answers, FORMS_AT_ONCE)
    entries = storm_app.models(kind)[1]
    with storm_tables.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(entries.__table__)) == FORMS_AT_ONCE


def test_three_processes_on_one_sqlite_file_make_one_row_a_form(
    storm_tables, sqlite_url, redis_url
):
    """As three workers of a server on one host: the duplicates of each form spread over
    the three, the writer lock of the file shared by them all."""
    ports = [free_port() for _ in range(3)]
    with ExitStack() as stack:
        for port in ports:
            worker = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, str(SERVE_STORM), str(port), redis_url, sqlite_url],
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=SERVE_STORM.parent,
                )
            )
            stack.callback(worker.wait, 10)
            stack.callback(worker.kill)
            assert worker.stdout is not None and worker.stdout.readline() == "serving\n"
        answers = storms_at_once(ports, FORMS_AT_ONCE, DUPLICATES)
    one_row_each(answers, FORMS_AT_ONCE)
    with storm_tables.connect() as conn:
        made = conn.scalar(select(func.count()).select_from(storm_app.Entry.__table__))
    assert made == FORMS_AT_ONCE


@pytest.fixture
def app_on(redis_url: str) -> Iterator[Callable[[Engine], Flask]]:
    """``app_on(engine)``: the sign-up app on ``engine`` (conftest's ``make_app`` is on the
    test's own file, with pysqlite's defaults); every app's Redis pool closed after."""
    apps: list[Flask] = []

    def make(engine: Engine) -> Flask:
        signup_app.Base.metadata.create_all(engine)
        apps.append(signup_app.create_app(sessionmaker(engine), REDIS_URL=redis_url))
        return apps[-1]

    yield make
    for app in apps:
        with app.app_context():
            signup_app.submit_once.redis.close()


def test_duplicates_in_flight_wait_for_the_first_holding_no_connection_and_land_on_its_row(
    app_on, sqlite_url, signups
):
    """The first submit holds the writer lock (held at ``token_consumed``) until the other
    four have each tried it and found it taken: they wait, holding none of the pool's two
    connections, and all land on the first one's row, told that they waited."""
    engine = create_engine(sqlite_url, pool_size=2, max_overflow=0, pool_timeout=10)
    app = app_on(engine)
    entered: list[str] = []
    arrived = threading.Condition()
    taken = threading.Event()

    def counting(wsgi: Any) -> Any:
        def counted(environ: Any, start_response: Any) -> Any:
            if environ["REQUEST_METHOD"] == "POST":
                with arrived:
                    entered.append(environ["PATH_INFO"])
                    arrived.notify_all()
            return wsgi(environ, start_response)

        return counted

    # The threads that tried the writer lock (BEGIN IMMEDIATE): the first took it, each
    # other found it taken, and waits.
    tried: set[int] = set()

    @event.listens_for(engine, "before_cursor_execute")
    def trying(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement == "BEGIN IMMEDIATE":
            with arrived:
                tried.add(threading.get_ident())
                arrived.notify_all()

    def hold(sender: Any, **extra: Any) -> None:
        if not taken.is_set():
            taken.set()
            with arrived:
                assert arrived.wait_for(lambda: len(entered) == 5 and len(tried) == 5, 30)

    seen: list[tuple[str, bool]] = []
    app.wsgi_app = counting(app.wsgi_app)  # type: ignore[method-assign]
    with (
        signals.token_consumed.connected_to(hold, sender=app),
        signals.submit_decided.connected_to(
            lambda sender, outcome, **extra: seen.append((outcome.kind, outcome.waited)),
            sender=app,
        ),
    ):
        answers = OnceForms(app.test_client()).open("/signup").submit_concurrently([ADA] * 5)
    engine.dispose()
    assert taken.is_set()
    assert {(a.status_code, a.headers["Location"]) for a in answers} == {(303, "/thanks/1")}
    assert sorted(seen) == [("created", False)] + [("duplicate", True)] * 4
    assert signups() == ["ada@example.com"]


def test_a_storm_of_webhook_retries_with_one_event_makes_one_row_and_replays_it_on_sqlite(
    app, signups
):
    """``idempotent()``: its claim of the key (``SET NX``) under the same lock; the retries
    wait for the first and get its answer again."""
    start = threading.Barrier(10)
    event = {"event_id": "evt-1", "email": "ada@example.com"}

    def send(_: int) -> Any:
        client = app.test_client()
        start.wait()
        return client.post("/webhooks/signups", json=event)

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(send, range(10)))
    assert {(a.status_code, a.json["id"]) for a in answers} == {(200, 1)}
    replayed = sorted(a.headers.get("Idempotent-Replayed", "") for a in answers)
    assert replayed == [""] + ["true"] * 9
    assert signups() == ["ada@example.com"]


def test_a_script_asks_what_became_of_a_submit_on_sqlite_without_spending_it(
    app, once_forms, signups
):
    """While a submit holds the writer lock the answer is ``running`` (on SQLite: some
    submit is running; ask again), then ``done`` and where."""
    check = {"X-Submit-Once-Check": "1"}
    page = once_forms.open("/signup")
    assert page.submit({}, headers=check).json == {"status": "not_done", "location": None}
    taken, release = threading.Event(), threading.Event()

    def hold(sender: Any, **extra: Any) -> None:
        taken.set()
        assert release.wait(30)

    with signals.token_consumed.connected_to(hold, sender=app):
        first = threading.Thread(
            target=page.submit, args=(ADA,), kwargs={"client": once_forms.clone()}
        )
        first.start()
        try:
            assert taken.wait(30)
            assert page.submit({}, headers=check).json["status"] == "running"
        finally:
            release.set()
            first.join(30)
    assert page.submit({}, headers=check).json == {"status": "done", "location": "/thanks/1"}
    assert signups() == ["ada@example.com"]


def test_work_left_in_the_request_session_is_refused_on_sqlite_before_the_token_is_spent(
    storm_tables, sqlite_url, redis_url
):
    """A flushed INSERT the app left before the submit would commit with the token's row:
    pysqlite has begun a transaction for it, which is how SQLite tells it."""
    app, close = storm_app.create_app("sessionmaker", sqlite_url, redis_url, POOL)
    dirty = {"on": False}

    @app.before_request
    def leave_work_behind() -> None:
        if dirty["on"]:
            storm_app.submit_once.session.add(storm_app.Topic(id=2, name="coffee"))

    try:
        client = app.test_client()
        token = hidden(client.get("/").text, "form_token")
        dirty["on"] = True
        with pytest.raises(RuntimeError, match="unsaved changes"):
            client.post("/entries", data={"form_token": token, "topic": "1"})
        dirty["on"] = False
        assert client.post("/entries", data={"form_token": token, "topic": "1"}).status_code == 303
    finally:
        close()
    with storm_tables.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(storm_app.Topic.__table__)) == 1


def spent_token(rdb: redis.Redis, before: set[str]) -> str:
    (key,) = before - {k for k in rdb.keys("so:*") if not k.startswith("so:issued:")}
    return key


def test_a_spent_token_that_reappears_meets_the_unique_digest_on_sqlite(
    make_app, once_forms, rdb, sessions, caplog
):
    """Redis gives a spent token back (a replica promoted before it saw the GETDEL) and
    another worker, which never saw the submit land, is sent it again: its GETDEL
    succeeds, and the INSERT meets the UNIQUE digest. Then Redis is flushed, and a third
    worker finds the row by its digest: still one row."""
    page = once_forms.open("/signup", form=1)
    before = {k for k in rdb.keys("so:*") if not k.startswith("so:issued:")}
    assert page.submit({"text": "Hello"}).status_code == 303
    key = spent_token(rdb, before)
    rdb.set(key, 1, ex=60)
    other = make_app().test_client()
    other.set_cookie("session", once_forms.client.get_cookie("session").value)
    again = page.submit({"text": "Hello"}, client=other)
    assert (again.status_code, again.headers["Location"]) == (303, "/comments/1")
    assert rdb.exists(key) == 0, "the token that came back was spent, not left live"
    assert "came back in Redis; the unique constraint held" in caplog.text
    rdb.flushall()
    third = make_app().test_client()
    third.set_cookie("session", once_forms.client.get_cookie("session").value)
    flushed = page.submit({"text": "Hello"}, client=third)
    assert (flushed.status_code, flushed.headers["Location"]) == (303, "/comments/1")
    with sessions() as db:
        assert db.scalar(select(func.count()).select_from(signup_app.Comment)) == 1


def test_a_worker_killed_inside_its_transaction_on_sqlite_frees_nothing_and_a_resubmit_recovers(
    make_app, redis_url, sqlite_url, signups
):
    """Killed (SIGKILL) while it holds the writer lock, after the GETDEL: the file keeps
    no half row, the lock dies with the process, and the token stays spent."""
    with signup_worker(redis_url, sqlite_url, ADA) as (worker, browser, form):
        lost: list[BaseException] = []

        def submit() -> None:
            try:
                browser.post("/signup/send", form)
            except (OSError, http.client.HTTPException) as error:
                lost.append(error)

        posting = threading.Thread(target=submit)
        posting.start()
        consumed = worker.stdout.readline()
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        posting.join(30)
    assert consumed == f"consumed {worker.pid}\n" and lost and signups() == []
    client = make_app().test_client()
    client.set_cookie("session", browser.cookies["session"])
    reload = client.post("/signup/send", data=form)
    assert reload.status_code == 409 and 'value="Ada Lovelace"' in reload.text
    done = client.post(
        "/signup/send", data={**form, "form_token": hidden(reload.text, "form_token")}
    )
    assert done.status_code == 303 and signups() == ["ada@example.com"]


def test_a_form_with_a_step_outside_the_database_is_refused_on_sqlite_before_anything_is_spent(
    sqlite_url, redis_url, rdb
):
    app = Flask(__name__)
    app.config.update(SECRET_KEY="s", REDIS_URL=redis_url, TESTING=True)
    engine = create_engine(sqlite_url)
    signup_app.Base.metadata.create_all(engine)
    submit_once = SubmitOnce(app, sessions=sessionmaker(engine))

    def charge(db: Session, row: Any, key: str) -> None:
        raise AssertionError("never called")

    @app.post("/subscribe")
    @submit_once.form(model=signup_app.Subscription, done="subscribe", then=charge)
    def subscribe(form: None, db: Session) -> Any:
        return signup_app.Subscription(email="ada@example.com")

    @app.get("/subscribe")
    def page() -> str:
        return render_template_string('<form>{{ submit_once.input("subscribe") }}</form>')

    client = app.test_client()
    token = hidden(client.get("/subscribe").text, "form_token")
    keys = rdb.dbsize()
    with pytest.raises(RuntimeError, match="then= is not supported on SQLite yet"):
        client.post("/subscribe", data={"form_token": token})
    assert rdb.dbsize() == keys
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(signup_app.Subscription)) == 0
    with app.app_context():
        # The sweeper too (flask submit-once resume).
        with pytest.raises(RuntimeError, match="then= is not supported on SQLite yet"):
            submit_once.resume()
        submit_once.redis.close()
    engine.dispose()


def no_transactions_of_its_own(engine: Engine) -> None:
    """SQLAlchemy's recipe for SQLite transactions: pysqlite's own handling off."""

    @event.listens_for(engine, "connect")
    def off(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")


def test_sqlite_in_memory_is_refused_when_the_app_starts(app_on):
    """A database each connection has to itself has no lock to share: refused by
    init_app, naming what to use, not at the first submit (a 500 for the user)."""
    from flask_submit_once import UnsupportedDatabaseError

    for url in ("sqlite://", "sqlite:///:memory:"):
        engine = create_engine(url)
        with pytest.raises(UnsupportedDatabaseError, match="an SQLite database in a file"):
            app_on(engine)
        engine.dispose()


def test_sqlite_without_its_own_transaction_handling_is_refused_saying_how_to_fix_it(
    app_on, sqlite_url
):
    engine = create_engine(sqlite_url)
    no_transactions_of_its_own(engine)
    page = OnceForms(app_on(engine).test_client()).open("/signup")
    with pytest.raises(RuntimeError, match="pysqlite's own transaction handling"):
        page.submit(ADA)
    engine.dispose()


def test_the_testing_plugin_needs_no_postgresql(once_forms, signups):
    """A user's suite on SQLite: the plugin's double click and storm, one row each."""
    page = once_forms.open("/signup")
    once_forms.assert_once(page.submit_twice(ADA), rows=lambda: len(signups()))
    grace = {**ADA, "email": "grace@example.com"}
    answers = once_forms.open("/signup").submit_concurrently([grace] * 5)
    assert once_forms.assert_once(answers, rows=lambda: len(signups()) - 1) == "/thanks/2"
