"""SubmitOnce, the extension: its settings, what ``init_app`` changes in an app (only what
it was asked to), the Redis client it uses, what a misconfigured app or an app written for
0.10 is told, and the hooks a form offers (``on_outcome``, ``messages``,
``fingerprint``)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys

import pytest
import redis
from flask import (
    Flask,
    flash,
    get_flashed_messages,
    render_template,
    render_template_string,
    request,
)
from flask.sessions import SecureCookieSessionInterface
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFError, CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import Engine, String, create_engine, text
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    mapped_column,
    scoped_session,
    sessionmaker,
)
from wtforms import Form, StringField

import signup_app
from flask_submit_once import (
    Outcome,
    SubmissionMixin,
    SubmitOnce,
    SubmitOnceError,
    TokenStore,
    UnavailableError,
)
from flask_submit_once._errors import UnsupportedDatabaseError
from flask_submit_once.testing import OnceForms
from servers import free_port
from signup_app import Comment

PAGE = (
    '<form>{{ submit_once.message or "" }}|{{ get_flashed_messages()|join }}|'
    '{{ submit_once.input("note") }}</form>'
)


def flask_app(**config: object) -> Flask:
    app = Flask(__name__)
    app.config.update({"SECRET_KEY": "s", **config})
    return app


def close(app: Flask) -> None:
    with app.app_context():
        # the app's client, whichever instance asks
        SubmitOnce().redis.close()


def test_importing_the_library_imports_no_app_and_no_test_around_it():
    check = (
        "import flask_submit_once, flask_submit_once.testing, sys; "
        "assert not {'signup_app', 'webapp', 'servers', 'flask_wtf'} & set(sys.modules),"
        " sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", check], check=True)


def test_init_app_writes_nothing_of_flask_wtf(redis_url):
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL_SECONDS=1800)
    SubmitOnce(app)
    assert [key for key in app.config if key.startswith("WTF_")] == []
    CSRFProtect(app)
    # Flask-WTF's own default, set by Flask-WTF.
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 3600
    close(app)


@pytest.mark.parametrize(
    "csrf_limit", [600, None], ids=["the app's 600 s", "flask-wtf's default 3600 s"]
)
def test_a_csrf_time_limit_shorter_than_the_ttl_is_warned_about_and_kept(redis_url, csrf_limit):
    limit = {} if csrf_limit is None else {"WTF_CSRF_TIME_LIMIT": csrf_limit}
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL_SECONDS=7200, **limit)
    shown = csrf_limit or 3600
    with pytest.warns(
        UserWarning,
        match=rf"WTF_CSRF_TIME_LIMIT \({shown} s\) is shorter than "
        r"SUBMIT_ONCE_TTL_SECONDS \(7200 s\)",
    ):
        SubmitOnce(app)
    assert app.config.get("WTF_CSRF_TIME_LIMIT") == csrf_limit
    close(app)


def test_no_csrf_time_limit_or_csrf_off_is_nothing_to_warn_about(redis_url):
    # filterwarnings=error: a warning would fail the test.
    for config in ({"WTF_CSRF_TIME_LIMIT": None}, {"WTF_CSRF_ENABLED": False}):
        app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL_SECONDS=7200, **config)
        SubmitOnce(app)
        close(app)


def test_init_app_leaves_app_session_interface_alone_by_default(redis_url):
    app = flask_app(REDIS_URL=redis_url)
    before = app.session_interface
    SubmitOnce(app)
    assert app.session_interface is before
    close(app)


def test_back_shows_form_replaces_only_flasks_own_session_interface(redis_url):
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_BACK_SHOWS_FORM=True)
    SubmitOnce(app)
    assert type(app.session_interface) is not SecureCookieSessionInterface
    assert isinstance(app.session_interface, SecureCookieSessionInterface)
    close(app)

    class AppsOwn(SecureCookieSessionInterface):
        pass

    chosen = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_BACK_SHOWS_FORM=True)
    chosen.session_interface = own = AppsOwn()
    SubmitOnce(chosen)
    assert chosen.session_interface is own
    close(chosen)


def csrf_handlers(app: Flask) -> dict:
    return app.error_handler_spec.get(None, {}).get(400, {})


def test_init_app_answers_csrf_errors_by_default_and_says_so_once(redis_url, caplog):
    app = flask_app(REDIS_URL=redis_url)
    with caplog.at_level(logging.INFO, logger="flask_submit_once"):
        SubmitOnce(app)
    assert CSRFError in csrf_handlers(app)
    said = [r for r in caplog.records if "SUBMIT_ONCE_ANSWER_CSRF_ERRORS" in r.getMessage()]
    assert [record.levelno for record in said] == [logging.INFO]
    close(app)


def test_answer_csrf_errors_false_registers_no_handler(redis_url, caplog):
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_ANSWER_CSRF_ERRORS=False)
    with caplog.at_level(logging.INFO, logger="flask_submit_once"):
        SubmitOnce(app)
    assert CSRFError not in csrf_handlers(app)
    assert "SUBMIT_ONCE_ANSWER_CSRF_ERRORS" not in caplog.text
    close(app)


def test_an_apps_own_csrf_error_handler_is_kept(redis_url):
    app = flask_app(REDIS_URL=redis_url)

    @app.errorhandler(CSRFError)
    def own(error):
        return "own", 400

    SubmitOnce(app)
    assert csrf_handlers(app)[CSRFError] is own
    close(app)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("SUBMIT_ONCE_TTL", "SUBMIT_ONCE_TTL_SECONDS"),
        ("SUBMIT_ONCE_MAX_PER_SESSION", "SUBMIT_ONCE_MAX_FORMS_PER_SESSION"),
        (
            "SUBMIT_ONCE_MAX_PER_CLIENT_PER_MINUTE",
            "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE",
        ),
        ("SUBMIT_ONCE_SIGNED_WHEN_REDIS_AWAY", "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS"),
        ("SUBMIT_ONCE_REDIS_DOWN_FALLBACK", "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS"),
        ("SUBMIT_ONCE_PREFIX", "SUBMIT_ONCE_KEY_PREFIX"),
        ("SUBMIT_ONCE_FIELD", "SUBMIT_ONCE_FIELD_NAME"),
        ("FORM_TOKENS_TTL", "SUBMIT_ONCE_TTL_SECONDS"),
        ("FORM_TOKENS_WAIT_SECONDS", "SUBMIT_ONCE_WAIT_SECONDS"),
    ],
)
def test_a_renamed_setting_stops_init_app_naming_the_new_one(redis_url, old, new):
    """A setting an upgraded app still sets under its old name would be ignored
    silently (a TTL back to its default, a limit off): start-up stops instead."""
    app = flask_app(REDIS_URL=redis_url, **{old: 60})
    with pytest.raises(RuntimeError, match=f"^{old} was renamed: set {new} instead.$"):
        SubmitOnce(app)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("BadFormToken", "FormTokenError"),
        ("CrossSite", "CrossSiteError"),
        ("TooManyForms", "TooManyFormsError"),
        ("Unavailable", "UnavailableError"),
        ("NotUnicode", "NotUnicodeError"),
    ],
)
def test_a_renamed_exception_is_an_import_error_naming_the_new_one(old, new):
    with pytest.raises(ImportError, match=f"^{old} was renamed {new} in Flask-Submit-Once 1.0$"):
        exec(f"from flask_submit_once import {old}", {})
    import flask_submit_once

    assert issubclass(getattr(flask_submit_once, new), flask_submit_once.SubmitOnceError)


@pytest.mark.parametrize(
    ("decorator", "old", "new"),
    [
        ("form", "fields", "fingerprint"),
        ("form", "answer", "on_outcome"),
        ("idempotent", "answer", "on_outcome"),
    ],
)
def test_a_renamed_keyword_of_a_decorator_is_a_type_error_naming_the_new_one(decorator, old, new):
    with pytest.raises(
        TypeError, match=rf"^{decorator}\({old}=\) was renamed {decorator}\({new}=\) in"
    ):
        getattr(SubmitOnce(), decorator)(**{old: None})


def test_a_renamed_method_is_an_attribute_error_naming_the_new_one(redis_url):
    client = redis.Redis.from_url(redis_url)
    renamed = [
        (SubmitOnce(), "issue", "SubmitOnce.issue was renamed issue_tokens"),
        (TokenStore(client), "issue", "TokenStore.issue was renamed create"),
        (Outcome("created"), "landed", "Outcome.landed was renamed took_effect"),
    ]
    for thing, old, says in renamed:
        with pytest.raises(AttributeError, match=f"^{says} in Flask-Submit-Once 1.0$"):
            getattr(thing, old)
        assert not hasattr(thing, "nope")
    client.close()


def test_a_ready_client_is_used_as_it_is_by_every_app_it_is_given_to(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    submit_once = SubmitOnce(client=client)
    # and no Redis URL at all
    for app in (flask_app(), flask_app()):
        submit_once.init_app(app)
        with app.app_context():
            assert submit_once.redis is client
    client.close()


def test_a_misconfigured_app_is_told_how_to_fix_it(redis_url):
    with pytest.raises(RuntimeError, match="SUBMIT_ONCE_REDIS_URL"):
        SubmitOnce(flask_app())
    with pytest.raises(RuntimeError, match="not a one-server URL"):
        SubmitOnce(flask_app(REDIS_URL="redis+sentinel://127.0.0.1:1"))
    # Every token's MAC is made with a key derived from it.
    with pytest.raises(RuntimeError, match="set SECRET_KEY before init_app"):
        SubmitOnce(flask_app(REDIS_URL=redis_url, SECRET_KEY=None))
    with flask_app().app_context(), pytest.raises(RuntimeError, match="init_app"):
        assert SubmitOnce().redis
    app = flask_app(REDIS_URL=redis_url)
    # no sessions
    submit_once = SubmitOnce(app)
    with app.test_request_context(), pytest.raises(RuntimeError, match="sessions="):
        assert submit_once.session
    close(app)


def test_redis_unreachable_at_issue_is_unavailable_with_the_cause():
    app = flask_app(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    submit_once = SubmitOnce(app)
    with app.test_request_context("/"), pytest.raises(UnavailableError) as raised:
        submit_once.issue_tokens("note")
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    close(app)


# a plain WTForms form, no Flask-WTF: any validate()/errors will do
class NoteForm(Form):
    text = StringField()
    mood = StringField()


@pytest.fixture
def note_app(redis_url, sessions, rdb):
    """A form with every hook: its own words, the fields that make a note what it is,
    and an ``on_outcome`` that flashes on success and answers a change itself."""
    app = flask_app(REDIS_URL=redis_url)
    app.jinja_loader = DictLoader({"note.html": PAGE})
    app.jinja_env.globals["get_flashed_messages"] = get_flashed_messages
    submit_once = SubmitOnce(app, sessions=sessions)
    seen: list[Outcome] = []

    def on_outcome(outcome: Outcome):
        seen.append(outcome)
        match outcome:
            case Outcome(kind="created", result=note):
                flash(f"Saved note {note.id}")
            case Outcome(kind="changed", result=note):
                return {"first": note.text}, 409
        return None

    @app.get("/")
    def page():
        return render_template("note.html")

    @app.post("/note")
    @submit_once.form(
        lambda: NoteForm(request.form),
        model=Comment,
        template="note.html",
        done=lambda note: f"/notes/{note.id}",
        fingerprint=["text"],
        on_outcome=on_outcome,
        messages={"expired": lambda outcome: f"Gone ({outcome.kind})."},
    )
    def note(form: NoteForm, db):
        return Comment(text=form.text.data)

    app.extensions["test_seen"] = seen
    yield app
    close(app)


def test_the_on_outcome_hook_sees_each_outcome_and_answers_the_ones_it_chooses(note_app, rdb):
    client = note_app.test_client()
    token = client.get("/").text.split('value="')[1].split('"')[0]
    created = client.post("/note", data={"form_token": token, "text": "tea", "mood": "a"})
    assert created.status_code == 303 and created.headers["Location"] == "/notes/1"
    assert "Saved note 1" in client.get("/").text
    # Another mood is the same note (fingerprint=["text"]): a repeat, not a change.
    again = client.post("/note", data={"form_token": token, "text": "tea", "mood": "b"})
    assert again.headers["Location"] == "/notes/1"
    changed = client.post("/note", data={"form_token": token, "text": "coffee"})
    assert (changed.status_code, changed.json) == (409, {"first": "tea"})
    rdb.flushall()
    fresh = client.get("/").text.split('value="')[1].split('"')[0]
    rdb.flushall()
    expired = client.post("/note", data={"form_token": fresh, "text": "milk"})
    assert expired.status_code == 409 and "Gone (expired)." in expired.text
    kinds = [outcome.kind for outcome in note_app.extensions["test_seen"]]
    assert kinds == ["created", "duplicate", "changed", "expired"]


#: A database the library does not support: SQL Server, its dialect with a stand-in
#: DB-API module (nothing connects: the dialect's name is what is refused).
UNSUPPORTED_URL = "mssql+pyodbc://user:secret@dsn"


def unsupported_engine() -> Engine:
    return create_engine(UNSUPPORTED_URL, module=sqlite3)


def unsupported_sessions(app: Flask, kind: str) -> object:
    """What an app would hand over for a database the library does not support."""
    if kind == "flask_sqlalchemy":
        app.config["SQLALCHEMY_DATABASE_URI"] = UNSUPPORTED_URL
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {"module": sqlite3}
        db = SQLAlchemy()
        db.init_app(app)
        return db
    sessions = sessionmaker(unsupported_engine())
    return scoped_session(sessions) if kind == "scoped_session" else sessions


@pytest.mark.parametrize("kind", ["sessionmaker", "scoped_session", "flask_sqlalchemy"])
def test_an_unsupported_database_stops_init_app_naming_the_supported_ones(redis_url, kind):
    app = flask_app(REDIS_URL=redis_url)
    sessions = unsupported_sessions(app, kind)
    with pytest.raises(UnsupportedDatabaseError) as refused:
        SubmitOnce(app, sessions=sessions)
    assert str(refused.value) == (
        "Flask-Submit-Once does not support the database of its sessions (mssql): it "
        "supports PostgreSQL, SQLite, MariaDB. Give SubmitOnce sessions bound to one of these."
    )
    # Caught as any misconfiguration, or as any of the library's errors.
    assert isinstance(refused.value, RuntimeError) and isinstance(refused.value, SubmitOnceError)
    assert "submit_once" not in app.extensions


def test_every_supported_database_has_its_lock():
    from flask_submit_once._model import SUPPORTED_DATABASES
    from flask_submit_once._runner import LOCKINGS

    assert set(LOCKINGS) == set(SUPPORTED_DATABASES)


def test_an_unsupported_database_bound_after_init_app_is_refused_at_the_first_submit(redis_url):
    sessions = sessionmaker()
    app = signup_app.create_app(sessions, REDIS_URL=redis_url)
    sessions.configure(bind=unsupported_engine())
    page = OnceForms(app.test_client()).open("/signup")
    with pytest.raises(
        UnsupportedDatabaseError, match=r"\(mssql\): it supports PostgreSQL, SQLite, MariaDB\."
    ):
        page.submit({"email": "ada@example.com", "name": "Ada", "quantity": "2"})
    close(app)


def test_a_table_older_than_its_model_is_refused_at_the_first_submit_naming_its_columns(
    engine, redis_url
):
    """An app upgraded to 1.0 without its migration: the table lacks the step's lease.
    The first submit says which columns to add, rather than every repeat failing on the
    database's error; nothing is consumed or written."""

    class Base(DeclarativeBase):
        pass

    class Note(SubmissionMixin, Base):
        __tablename__ = "notes_made_by_0_10"
        id: Mapped[int] = mapped_column(primary_key=True)
        text: Mapped[str] = mapped_column(String(100))

    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS notes_made_by_0_10"))
        conn.execute(
            text(
                "CREATE TABLE notes_made_by_0_10 (id serial PRIMARY KEY, text varchar(100), "
                "submission_digest varchar(43) UNIQUE NOT NULL, submission_fingerprint text, "
                "submission_step varchar(64))"
            )
        )
    app = flask_app(REDIS_URL=redis_url, TESTING=True)
    submit_once = SubmitOnce(app, sessions=sessionmaker(engine))

    @app.get("/")
    def page() -> str:
        return render_template_string('<form method="post">{{ submit_once.input("create") }}')

    @app.post("/")
    @submit_once.form(lambda: NoteForm(request.form), model=Note, done=lambda note: "/")
    def create(form: NoteForm, db: object) -> Note:
        return Note(text=form.text.data)

    form = OnceForms(app.test_client()).open("/")
    with pytest.raises(RuntimeError) as refused:
        form.submit({"text": "milk"})
    assert str(refused.value).startswith(
        "The table notes_made_by_0_10 has no column submission_step_lease_owner, "
        "submission_step_lease_until, which Note maps: add them (a migration) before serving."
    )
    with engine.begin() as conn:
        assert conn.scalar(text("SELECT count(*) FROM notes_made_by_0_10")) == 0
        conn.execute(text("DROP TABLE notes_made_by_0_10"))
    close(app)
