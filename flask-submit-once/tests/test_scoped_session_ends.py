"""A ``scoped_session`` given as ``sessions=`` is the request's session, and ends with it.

Found by a newcomer's trial: an app that passes ``scoped_session(sessionmaker(
engine))`` as the docs show, and does nothing else, served by Werkzeug's threaded server.
Every request that read through ``submit_once.session`` (a result page, an htmx repeat
answered in place) left its thread's session in an open transaction, its connection idle
in transaction and out of the pool: 15 such connections after 250 htmx repeats, then a
``QueuePool limit ... reached`` 500 for every request. The extension now removes the
scoped session when the request's app context ends, as Flask-SQLAlchemy does its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from flask import Flask, abort, render_template_string
from flask_wtf import FlaskForm
from jinja2 import DictLoader
from sqlalchemy import Engine, String, create_engine, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, scoped_session, sessionmaker
from wtforms import StringField
from wtforms.validators import InputRequired

from flask_submit_once import SubmissionMixin, SubmitOnce
from live import Browser, hidden, serve

IDLE_IN_TRANSACTION = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
)
PAGE = (
    '<form method="post" action="/notes" hx-post="/notes">'
    '{{ submit_once.input("add") }}<input name="text"></form>'
)


class Base(DeclarativeBase):
    pass


class Note(SubmissionMixin, Base):
    __tablename__ = "scoped_notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    public_id: Mapped[str] = mapped_column(
        String(22), unique=True, default=lambda: secrets.token_urlsafe(16)
    )
    text: Mapped[str] = mapped_column(String(200))


class NoteForm(FlaskForm):
    text = StringField(validators=[InputRequired()])


@pytest.fixture
def small_pool(database_url: str) -> Iterator[Engine]:
    """Two connections, and a 3 s wait for one: a leak shows as a 500 at the third."""
    engine = create_engine(database_url, pool_size=2, max_overflow=0, pool_timeout=3)
    Base.metadata.create_all(engine)
    yield engine
    # a connection left in a transaction fails this, never hangs
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL lock_timeout = '5s'"))
        Base.metadata.drop_all(conn)
    engine.dispose()


@pytest.fixture
def app(small_pool: Engine, redis_url: str, rdb: object) -> Iterator[Flask]:
    """The docs' scoped_session, passed as it is: no teardown of the app's own."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="scoped", TESTING=True, REDIS_URL=redis_url, WTF_CSRF_ENABLED=False
    )
    submit_once = SubmitOnce(app, sessions=scoped_session(sessionmaker(small_pool)))

    @app.get("/")
    def page() -> str:
        return render_template_string(PAGE)

    @app.post("/notes")
    @submit_once.form(
        NoteForm, model=Note, done="note", result_fragment="_added.html", fragment="_form.html"
    )
    def add(form: NoteForm, session: object) -> Note:
        return Note(text=form.text.data)

    @app.get("/notes/<public_id>")
    def note(public_id: str) -> str:
        found = submit_once.session.scalar(select(Note).where(Note.public_id == public_id))
        return found.text if found else abort(404)

    app.jinja_loader = DictLoader(
        {"_added.html": "<p>{{ result.text }}</p>" + PAGE, "_form.html": PAGE}
    )
    yield app
    with app.app_context():
        submit_once.redis.close()


def test_reads_through_a_scoped_session_leave_no_connection_idle_in_transaction(
    app: Flask, small_pool: Engine
) -> None:
    client = app.test_client()
    token = hidden(client.get("/").text, "form_token")
    where = client.post("/notes", data={"form_token": token, "text": "tea"}).location
    assert client.get(where).text == "tea"
    with small_pool.connect() as conn:
        assert conn.scalar(IDLE_IN_TRANSACTION) == 0
    # every connection back in the pool
    assert small_pool.pool.checkedout() == 0


def test_htmx_repeats_and_result_pages_on_a_threaded_server_never_run_out_of_connections(
    app: Flask, small_pool: Engine
) -> None:
    with serve(app) as port:
        browser = Browser(port)
        token = hidden(browser.get("/").body, "form_token")
        sent = {"form_token": token, "text": "tea"}
        answers = [browser.post("/notes", sent, {"HX-Request": "true"}) for _ in range(6)]
        pages = [browser.get(answers[0].headers["Content-Location"]) for _ in range(6)]
    assert [answer.status for answer in answers] == [201] + [200] * 5
    assert [page.status for page in pages] == [200] * 6
    with small_pool.connect() as conn:
        assert conn.scalar(IDLE_IN_TRANSACTION) == 0
