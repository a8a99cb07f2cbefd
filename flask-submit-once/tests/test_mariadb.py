"""The core promises on MariaDB (Debian's 10.11, InnoDB, PyMySQL), each test on a database
of its own in one throwaway server: storms of duplicates of several forms at once make one
row each, a duplicate in flight waits for the first and lands on its row, a token Redis
gives back meets the UNIQUE digest, a worker killed inside its transaction frees nothing
and keeps no lock; the named lock never goes back to the pool held; a step outside the
database (``then=``) is done once under a storm, and a stalled holder's lease runs out and
passes on. REPEATABLE READ, under which a duplicate could miss the first submit's row, is
refused, saying what to set.

The lock there is a named lock (``GET_LOCK``) of the connection, one per digest, released
as the connection goes back to the pool. The server runs with READ COMMITTED, as the
library asks (an operator's ``transaction-isolation`` setting). The sign-up app
(conftest's ``make_app``, ``once_forms``, ``signups``) runs on the test's database here:
this module's ``sessions`` replaces the suite's.
"""

from __future__ import annotations

import http.client
import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

import checkout_app
import signup_app
import storm_app
from flask_submit_once import signals
from flask_submit_once._runner import Lease, LeaseLost, lock_key
from flask_submit_once.testing import OnceForms
from live import hidden, serve, signup_worker
from servers import MariaDBServer, mariadb_missing
from test_sqlite import ADA, DUPLICATES, FORMS_AT_ONCE, one_row_each, spent_token, storms_at_once

pytestmark = pytest.mark.mariadb

CHECKOUT = {"email": "ada@example.com", "cents": "1250"}
POOL = {"pool_size": 10, "max_overflow": 10, "pool_timeout": 30}
_databases = itertools.count(1)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    missing = mariadb_missing()
    if missing is not None:
        pytest.skip(f"the MariaDB tests need a server and a driver: {missing}")
    server = MariaDBServer()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def mariadb_url(mariadb: MariaDBServer) -> str:
    """A database of this test's own."""
    name = f"submit_once_{next(_databases)}"
    mariadb.create_database(name)
    return mariadb.url(name)


@pytest.fixture
def mariadb_engine(mariadb_url: str) -> Iterator[Engine]:
    engine = create_engine(mariadb_url)
    signup_app.Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(mariadb_engine: Engine) -> sessionmaker[Session]:
    """The sign-up app's sessions (conftest's ``make_app``, ``client``, ``once_forms``,
    ``signups``), on this test's database."""
    return sessionmaker(mariadb_engine)


@pytest.fixture
def storm_tables(mariadb_url: str) -> Iterator[Engine]:
    """The storm app's tables in this test's database, each kind with topic 1."""
    engine = create_engine(mariadb_url)
    for metadata in (storm_app.Base.metadata, storm_app.db.metadata):
        metadata.create_all(engine)
    with engine.begin() as conn:
        for kind in ("sessionmaker", "flask_sqlalchemy"):
            conn.execute(storm_app.models(kind)[0].__table__.insert().values(id=1, name="tea"))
    yield engine
    engine.dispose()


@pytest.mark.parametrize("kind", storm_app.KINDS)
def test_storms_of_duplicates_of_several_forms_at_once_make_one_row_each_on_mariadb(
    storm_tables, mariadb_url, redis_url, kind
):
    app, close = storm_app.create_app(kind, mariadb_url, redis_url, POOL)
    try:
        with serve(app) as port:
            answers = storms_at_once([port], FORMS_AT_ONCE, DUPLICATES)
    finally:
        close()
    one_row_each(answers, FORMS_AT_ONCE)
    entries = storm_app.models(kind)[1]
    with storm_tables.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(entries.__table__)) == FORMS_AT_ONCE


@pytest.fixture
def app_on(redis_url: str) -> Iterator[Callable[[Engine], Flask]]:
    """``app_on(engine)``: the sign-up app on ``engine``; every app's Redis pool closed
    after."""
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
    app_on, mariadb_url, signups
):
    """The first submit holds its named lock (held at ``token_consumed``) until the other
    four are in the app and a moment more: they wait, holding none of the pool's two
    connections, and all land on the first one's row, told that they waited."""
    engine = create_engine(mariadb_url, pool_size=2, max_overflow=0, pool_timeout=10)
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

    # The threads that have asked for the named lock (GET_LOCK); while the first holds it,
    # each such try fails, and its thread waits (holding no connection) to try again.
    tried: set[int] = set()

    def asked(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "GET_LOCK" in statement:
            with arrived:
                tried.add(threading.get_ident())
                arrived.notify_all()

    def hold(sender: Any, **extra: Any) -> None:
        if not taken.is_set():
            taken.set()
            me = threading.get_ident()
            with arrived:
                assert arrived.wait_for(lambda: len(entered) == 5, 30)
                # the other four are waiting for the lock (a fixed pause was not enough
                # on a loaded machine)
                assert arrived.wait_for(lambda: len(tried - {me}) >= 4, 30), tried

    seen: list[tuple[str, bool]] = []
    app.wsgi_app = counting(app.wsgi_app)  # type: ignore[method-assign]
    event.listen(engine, "after_cursor_execute", asked)
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


def lock_is_free(engine: Engine, digest: str) -> bool:
    """Whether no connection holds the named lock of ``digest``."""
    with engine.connect() as conn:
        name = f"flask_submit_once:{lock_key(digest)}"
        return bool(conn.exec_driver_sql("SELECT IS_FREE_LOCK(%(n)s)", {"n": name}).scalar())


@pytest.mark.parametrize("view_fails", [False, True], ids=["committed", "view_raised"])
def test_the_named_lock_is_released_as_its_connection_goes_back_to_the_pool(
    app_on, mariadb_url, view_fails
):
    """A named lock is the connection's and would outlive the COMMIT: after a submit that
    committed, and after one whose view raised, the pool's one connection holds none."""
    engine = create_engine(mariadb_url, pool_size=1, max_overflow=0)
    app = app_on(engine)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    digests: list[str] = []

    def fail(sender: Any, **extra: Any) -> None:
        if view_fails:
            raise RuntimeError("the view's own error")

    with (
        signals.token_consumed.connected_to(lambda _, digest: digests.append(digest), sender=app),
        signals.token_consumed.connected_to(fail, sender=app),
    ):
        answer = OnceForms(app.test_client()).open("/signup").submit(ADA)
    assert answer.status_code == (500 if view_fails else 303)
    other = create_engine(mariadb_url)
    try:
        assert lock_is_free(other, digests[0])
    finally:
        other.dispose()
        engine.dispose()


def test_a_spent_token_that_reappears_meets_the_unique_digest_on_mariadb(
    make_app, once_forms, rdb, sessions, caplog
):
    """Redis gives a spent token back (a replica promoted before it saw the GETDEL) and
    another worker is sent it again: its GETDEL succeeds, and the INSERT meets the UNIQUE
    digest. Then Redis is flushed, and a third worker finds the row by its digest: still
    one row."""
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


def test_a_worker_killed_inside_its_transaction_on_mariadb_frees_nothing_and_keeps_no_lock(
    make_app, redis_url, mariadb_url, signups
):
    """Killed (SIGKILL) while it holds the named lock, after the GETDEL: the server rolls
    its transaction back and ends the lock with its session, so a resubmit of the same
    token takes the lock at once and is told the form expired; the token stays spent."""
    with signup_worker(redis_url, mariadb_url, ADA) as (worker, browser, form):
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
    app = make_app(SUBMIT_ONCE_WAIT_SECONDS=5)
    seen: list[tuple[str, bool]] = []
    client = app.test_client()
    client.set_cookie("session", browser.cookies["session"])
    with signals.submit_decided.connected_to(
        lambda sender, outcome, **extra: seen.append((outcome.kind, outcome.waited)), sender=app
    ):
        reload = client.post("/signup/send", data=form)
    assert reload.status_code == 409 and 'value="Ada Lovelace"' in reload.text
    assert seen == [("expired", False)]
    done = client.post(
        "/signup/send", data={**form, "form_token": hidden(reload.text, "form_token")}
    )
    assert done.status_code == 303 and signups() == ["ada@example.com"]


def test_repeatable_read_is_refused_on_mariadb_saying_what_to_set(mariadb_url, redis_url, rdb):
    """InnoDB's default: a read earlier in the transaction (a validator's) fixes what it
    sees, and a duplicate that takes the lock as the first commits would miss its row."""
    engine = create_engine(mariadb_url, isolation_level="REPEATABLE READ")
    signup_app.Base.metadata.create_all(engine)
    app = signup_app.create_app(sessionmaker(engine), REDIS_URL=redis_url)
    page = OnceForms(app.test_client()).open("/signup")
    keys = rdb.dbsize()
    with pytest.raises(RuntimeError, match="needs MariaDB's READ COMMITTED isolation"):
        page.submit(ADA)
    assert rdb.dbsize() == keys
    with app.app_context():
        signup_app.submit_once.redis.close()
    engine.dispose()


@pytest.fixture
def checkout_on_mariadb(mariadb_url, redis_url, provider):
    """The checkout app (checkout_app.py) on this test's database, its tables made."""
    engine = create_engine(mariadb_url)
    checkout_app.Base.metadata.create_all(engine)
    app = checkout_app.create_app(sessionmaker(engine), provider, REDIS_URL=redis_url)
    yield app, engine
    with app.app_context():
        checkout_app.submit_once.redis.close()
    engine.dispose()


def test_duplicates_at_once_make_one_order_charged_once_on_mariadb_and_no_lease_is_left(
    checkout_on_mariadb, provider
):
    """The step's lease on its row (a conditional UPDATE): the first charge waits until
    every duplicate has reached the app, and only one holder charges."""
    app, engine = checkout_on_mariadb
    entered: list[str] = []

    def counting(wsgi: Any) -> Any:
        def counted(environ: Any, start_response: Any) -> Any:
            entered.append(environ["PATH_INFO"])
            provider.poke()
            return wsgi(environ, start_response)

        return counted

    page = OnceForms(app.test_client()).open("/checkout")
    app.wsgi_app = counting(app.wsgi_app)  # type: ignore[method-assign]
    provider.hold(until=lambda: len(entered) == DUPLICATES)
    answers = page.submit_concurrently([CHECKOUT] * DUPLICATES)
    assert {(a.status_code, a.headers.get("Location")) for a in answers} == {(303, "/orders/1")}
    assert list(provider.calls.values()) == [1]
    Order = checkout_app.Order
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                Order.charge_id,
                Order.submission_step,
                Order.submission_step_lease_owner,
                Order.submission_step_lease_until,
            )
        ).all()
    assert [tuple(row) for row in rows] == [("ch_1", None, None, None)]


def test_a_holder_that_outlived_its_lease_on_mariadb_records_nothing_and_the_next_records_it(
    checkout_on_mariadb, provider
):
    """A killed or stalled holder's lease runs out (a DATETIME there: whole seconds), the
    next holder takes it, and the stalled one cannot record what it did."""
    app, engine = checkout_on_mariadb
    provider.mode = "fail"
    assert OnceForms(app.test_client()).open("/checkout").submit(CHECKOUT).status_code == 503
    Order = checkout_app.Order
    with Session(engine) as db:
        digest = db.scalars(select(Order.submission_digest)).one()
    stalled = Lease(engine, Order, digest, "charge", 1)
    assert stalled.take(wait=0)
    assert not Lease(engine, Order, digest, "charge", 30).take(wait=0)
    time.sleep(2.1)
    taker = Lease(engine, Order, digest, "charge", 30)
    assert taker.take(wait=0) and taker.held
    with Session(engine) as db:
        db.get(Order, 1).charge_id = "ch_stalled"
        db.get(Order, 1).submission_step = None
        with pytest.raises(LeaseLost):
            stalled.commit_with(db)
        db.rollback()
    with Session(engine) as db:
        db.get(Order, 1).charge_id = "ch_taker"
        db.get(Order, 1).submission_step = None
        taker.commit_with(db)
    with engine.connect() as conn:
        row = conn.execute(select(Order.charge_id, Order.submission_step_lease_owner)).one()
    assert tuple(row) == ("ch_taker", None)
