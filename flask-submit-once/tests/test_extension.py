"""SubmitOnce, the extension: its settings, the Redis client it uses, what a
misconfigured app is told, and the hooks a form offers (``answer``, ``messages``,
``fields``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from flask import Flask, flash, get_flashed_messages, render_template, request
from flask_wtf.csrf import CSRFProtect
from jinja2 import DictLoader
from wtforms import Form, StringField

from flask_submit_once import Outcome, SubmitOnce, Unavailable
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
        SubmitOnce().redis.close()  # the app's client, whichever instance asks


def test_importing_the_library_imports_no_app_and_no_test_around_it():
    check = (
        "import flask_submit_once, flask_submit_once.testing, sys; "
        "assert not {'signup_app', 'webapp', 'servers', 'flask_wtf'} & set(sys.modules),"
        " sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", check], check=True)


@pytest.mark.parametrize("submit_once_first", [True, False])
def test_the_csrf_time_limit_is_the_token_ttl_when_nobody_set_it(redis_url, submit_once_first):
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL=3600)
    extensions = [SubmitOnce(), CSRFProtect()]
    for extension in extensions if submit_once_first else reversed(extensions):
        extension.init_app(app)
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 3600
    close(app)


def test_a_csrf_time_limit_the_app_set_is_kept_and_a_shorter_one_warned_about(redis_url):
    app = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL=7200, WTF_CSRF_TIME_LIMIT=600)
    with pytest.warns(
        UserWarning,
        match=r"WTF_CSRF_TIME_LIMIT \(600 s\) is shorter than "
        r"SUBMIT_ONCE_TTL \(7200 s\)",
    ):
        SubmitOnce(app)
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 600
    close(app)
    unlimited = flask_app(REDIS_URL=redis_url, SUBMIT_ONCE_TTL=7200, WTF_CSRF_TIME_LIMIT=None)
    SubmitOnce(unlimited)  # no limit at all: nothing to warn about (filterwarnings=error)
    close(unlimited)


def test_a_ready_client_is_used_as_it_is_by_every_app_it_is_given_to(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    submit_once = SubmitOnce(client=client)
    for app in (flask_app(), flask_app()):  # and no Redis URL at all
        submit_once.init_app(app)
        with app.app_context():
            assert submit_once.redis is client
    client.close()


def test_a_misconfigured_app_is_told_how_to_fix_it(redis_url):
    with pytest.raises(RuntimeError, match="SUBMIT_ONCE_REDIS_URL"):
        SubmitOnce(flask_app())
    with pytest.raises(RuntimeError, match="not a one-server URL"):
        SubmitOnce(flask_app(REDIS_URL="redis+sentinel://127.0.0.1:1"))
    with pytest.raises(
        RuntimeError, match="FORM_TOKENS_TTL was renamed: set SUBMIT_ONCE_TTL instead"
    ):
        SubmitOnce(flask_app(REDIS_URL=redis_url, FORM_TOKENS_TTL=60))
    with flask_app().app_context(), pytest.raises(RuntimeError, match="init_app"):
        assert SubmitOnce().redis
    app = flask_app(REDIS_URL=redis_url)
    submit_once = SubmitOnce(app)  # no sessions
    with app.test_request_context(), pytest.raises(RuntimeError, match="sessions="):
        assert submit_once.session
    close(app)


def test_redis_unreachable_at_issue_is_unavailable_with_the_cause():
    app = flask_app(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    submit_once = SubmitOnce(app)
    with app.test_request_context("/"), pytest.raises(Unavailable) as raised:
        submit_once.issue("note")
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    close(app)


class NoteForm(Form):  # a plain WTForms form, no Flask-WTF: any validate()/errors will do
    text = StringField()
    mood = StringField()


@pytest.fixture
def note_app(redis_url, sessions, rdb):
    """A form with every hook: its own words, the fields that make a note what it is,
    and an ``answer`` that flashes on success and answers a change itself."""
    app = flask_app(REDIS_URL=redis_url)
    app.jinja_loader = DictLoader({"note.html": PAGE})
    app.jinja_env.globals["get_flashed_messages"] = get_flashed_messages
    submit_once = SubmitOnce(app, sessions=sessions)
    seen: list[Outcome] = []

    def answer(outcome: Outcome):
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
        fields=["text"],
        answer=answer,
        messages={"expired": lambda outcome: f"Gone ({outcome.kind})."},
    )
    def note(form: NoteForm, db):
        return Comment(text=form.text.data)

    app.extensions["test_seen"] = seen
    yield app
    close(app)


def test_the_answer_hook_sees_each_outcome_and_answers_the_ones_it_chooses(note_app, rdb):
    client = note_app.test_client()
    token = client.get("/").text.split('value="')[1].split('"')[0]
    created = client.post("/note", data={"form_token": token, "text": "tea", "mood": "a"})
    assert created.status_code == 303 and created.headers["Location"] == "/notes/1"
    assert "Saved note 1" in client.get("/").text
    # Another mood is the same note (fields=["text"]): a repeat, not a change.
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
