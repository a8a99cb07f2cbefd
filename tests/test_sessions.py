"""submit_once with the two ways a Flask app holds its database: a plain
``sessionmaker`` and Flask-SQLAlchemy, each on a pool of only 2 connections.

What a copier measured before: with ``sessions=db.session`` the winner got a
DetachedInstanceError 500 (the runner closed the request's session), and with
``db.session.session_factory`` every request held two connections, so waiting
duplicates starved a pool of 2 (8 x QueuePool timeout). Now the copier passes
``db`` (or the sessionmaker) and neither happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from flask import Flask, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import ForeignKey, String, create_engine, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from werkzeug.serving import make_server

from submit_once import Created, Duplicate, FormTokens
from tests.live import request as http
from tests.pauses import after_consume

POOL = {"pool_size": 2, "max_overflow": 0, "pool_timeout": 5}
DUPLICATES = 10


class Base(DeclarativeBase):
    pass


class Topic(Base):
    __tablename__ = "pool_test_topics"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40))


class Signup(Base):
    __tablename__ = "pool_test_signups"
    id: Mapped[int] = mapped_column(primary_key=True)
    topic_id: Mapped[int] = mapped_column(ForeignKey(Topic.id))
    form_token_digest: Mapped[str] = mapped_column(String(43), unique=True)


def find(db: Session, digest: str) -> int | None:
    return db.scalar(select(Signup.id).where(Signup.form_token_digest == digest))


def sign_up(db: Session, topic_id: int, digest: str) -> int:
    signup = Signup(topic_id=topic_id, form_token_digest=digest)
    db.add(signup)
    db.flush()
    return signup.id


def flask_sqlalchemy_app(url: str, redis_url: str) -> tuple[Flask, Callable[[], None]]:
    """The way most Flask apps hold their database: the view reads through
    ``db.session``, submits with ``sessions=db``, and uses what it read afterwards."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", SUBMIT_ONCE_REDIS_URL=redis_url,
                      SQLALCHEMY_DATABASE_URI=url, SQLALCHEMY_ENGINE_OPTIONS=POOL)
    db = SQLAlchemy()
    db.init_app(app)
    form_tokens = FormTokens(app)

    @app.get("/")
    def form() -> str:
        return form_tokens.issue("signup")

    @app.post("/")
    def submit() -> tuple[str, int]:
        token = form_tokens.submitted_token()
        topic = db.session.get(Topic, 1)  # the view's own read: its session holds a connection
        assert topic is not None
        outcome = form_tokens.submit_once(
            "signup", token, sessions=db,
            create=lambda s, digest: sign_up(s, topic.id, digest), find=find)
        assert isinstance(outcome, Created | Duplicate), outcome
        return f"signup {outcome.result} for {topic.name}", 200  # topic is still usable

    def close() -> None:
        with app.app_context():
            db.engine.dispose()
    app.extensions["pool_test_db"] = db
    return app, close


def sessionmaker_app(url: str, redis_url: str) -> tuple[Flask, Callable[[], None]]:
    """A plain SQLAlchemy app: short sessions from one sessionmaker."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", SUBMIT_ONCE_REDIS_URL=redis_url)
    engine = create_engine(url, **POOL)
    sessions = sessionmaker(engine, expire_on_commit=False)
    form_tokens = FormTokens(app)

    @app.get("/")
    def form() -> str:
        return form_tokens.issue("signup")

    @app.post("/")
    def submit() -> tuple[str, int]:
        token = form_tokens.submitted_token()
        with sessions() as db:
            topic = db.get(Topic, 1)
        assert topic is not None
        outcome = form_tokens.submit_once(
            "signup", token, sessions=sessions,
            create=lambda s, digest: sign_up(s, topic.id, digest), find=find)
        assert isinstance(outcome, Created | Duplicate), outcome
        return f"signup {outcome.result} for {topic.name}", 200

    return app, engine.dispose


@pytest.fixture
def tables(servers) -> Iterator[None]:
    Base.metadata.create_all(servers.engine)
    with Session(servers.engine) as db, db.begin():
        db.add(Topic(id=1, name="tea"))
    yield
    Base.metadata.drop_all(servers.engine)


def serve(app: Flask) -> tuple[int, Callable[[], None]]:
    """A real threaded HTTP server for ``app``: one thread per request."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()

    def stop() -> None:
        server.shutdown()
        thread.join(10)
        server.server_close()
    return server.server_port, stop


@pytest.mark.parametrize("build", [flask_sqlalchemy_app, sessionmaker_app])
def test_ten_concurrent_submits_on_a_pool_of_two_make_one_row_and_all_land_on_it(
        servers, tables, build):
    app, close = build(servers.database_url, servers.redis.url)
    # The first holds the token half a second: the other nine arrive while it runs.
    after_consume(app, lambda: time.sleep(0.5))
    port, stop = serve(app)
    try:
        page = http(port, "GET", "/")
        cookie = page.headers["set-cookie"].split(";", 1)[0]
        with ThreadPoolExecutor(DUPLICATES) as pool:
            answers = list(pool.map(
                lambda _: http(port, "POST", "/", cookie=cookie,
                               form={"form_token": page.body}), range(DUPLICATES)))
    finally:
        stop()
        after_consume(app, None)
        close()
        app.extensions["submit_once"].store.client.close()
    assert [a.status for a in answers] == [200] * DUPLICATES, [a.body[-300:] for a in answers]
    with servers.engine.connect() as conn:
        (only,) = conn.scalars(select(Signup.id)).all()
    assert {a.body for a in answers} == {f"signup {only} for tea"}


def test_unsaved_changes_in_the_request_session_are_refused_loudly(servers, tables):
    app, close = flask_sqlalchemy_app(servers.database_url, servers.redis.url)
    db: SQLAlchemy = app.extensions["pool_test_db"]
    form_tokens = FormTokens()
    try:
        for flush in (False, True):
            with app.test_request_context("/"):
                token = form_tokens.issue("signup")
                db.session.add(Topic(id=2, name="coffee"))
                if flush:
                    db.session.flush()  # flushed, not committed: still unsaved work
                with pytest.raises(RuntimeError, match="unsaved changes"):
                    form_tokens.submit_once("signup", token, sessions=db,
                                            create=lambda s, d: sign_up(s, 1, d), find=find)
                db.session.rollback()
                # The token was not spent: it still works once the session is clean.
                outcome = form_tokens.submit_once("signup", token, sessions=db,
                                                  create=lambda s, d: sign_up(s, 1, d),
                                                  find=find)
                assert isinstance(outcome, Created)
    finally:
        close()
        app.extensions["submit_once"].store.client.close()
    with servers.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Topic)) == 1
        assert conn.scalar(select(func.count()).select_from(Signup)) == 2


def test_sessions_of_another_kind_are_refused_with_what_to_pass(servers, tables):
    app, close = sessionmaker_app(servers.database_url, servers.redis.url)
    try:
        with app.test_request_context("/"):
            form_tokens = FormTokens()
            token = form_tokens.issue("signup")
            with pytest.raises(TypeError, match="sessionmaker, a scoped_session or a "
                                                "Flask-SQLAlchemy SQLAlchemy object"):
                form_tokens.submit_once("signup", token, sessions=object(),  # type: ignore
                                        create=lambda s, d: 1, find=lambda s, d: None)
            assert request.path == "/"
    finally:
        close()
        app.extensions["submit_once"].store.client.close()
