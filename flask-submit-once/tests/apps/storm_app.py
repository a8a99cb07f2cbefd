"""One small app, built each way a Flask app holds its database: a ``sessionmaker``, a
``scoped_session`` (removed when the app context ends, as its docs say), and
Flask-SQLAlchemy's ``db`` (its models on ``db.Model``). The form reads a topic through
the request's session, and the view uses what the form read, as real forms do."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, render_template_string
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import FlaskForm
from sqlalchemy import ForeignKey, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, scoped_session, sessionmaker
from wtforms import IntegerField, ValidationError
from wtforms.validators import InputRequired

from flask_submit_once import SubmissionMixin, SubmitOnce

KINDS = ("sessionmaker", "scoped_session", "flask_sqlalchemy")
submit_once = SubmitOnce()
db = SQLAlchemy()


class Base(DeclarativeBase):
    pass


class Topic(Base):
    __tablename__ = "storm_topics"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40))


class Entry(SubmissionMixin, Base):
    __tablename__ = "storm_entries"
    id: Mapped[int] = mapped_column(primary_key=True)
    topic_id: Mapped[int] = mapped_column(ForeignKey(Topic.id))
    topic_name: Mapped[str] = mapped_column(String(40))


class DbTopic(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "fsa_storm_topics"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40))


class DbEntry(SubmissionMixin, db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "fsa_storm_entries"
    id: Mapped[int] = mapped_column(primary_key=True)
    topic_id: Mapped[int] = mapped_column(ForeignKey(DbTopic.id))
    topic_name: Mapped[str] = mapped_column(String(40))


def models(kind: str) -> tuple[type[Any], type[Any]]:
    """(Topic, Entry) of ``kind``."""
    return (DbTopic, DbEntry) if kind == "flask_sqlalchemy" else (Topic, Entry)


def create_app(
    kind: str, database_url: str, redis_url: str, pool: Mapping[str, Any]
) -> tuple[Flask, Callable[[], None]]:
    """The app of ``kind`` on its own pool; and what closes its pools."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY="storm", TESTING=True, REDIS_URL=redis_url, WTF_CSRF_ENABLED=False)
    topic_model, entry_model = models(kind)
    if kind == "flask_sqlalchemy":
        app.config.update(
            SQLALCHEMY_DATABASE_URI=database_url, SQLALCHEMY_ENGINE_OPTIONS=dict(pool)
        )
        db.init_app(app)
        sessions: Any = db
        with app.app_context():
            engine = db.engine
    else:
        engine = create_engine(database_url, **pool)
        sessions = sessionmaker(engine)
        if kind == "scoped_session":
            sessions = scoped_session(sessions)
            app.teardown_appcontext(lambda error: sessions.remove())
    submit_once.init_app(app, sessions=sessions)

    class EntryForm(FlaskForm):
        topic = IntegerField(validators=[InputRequired()])

        def validate_topic(self, field: IntegerField) -> None:
            self.found = submit_once.session.get(topic_model, field.data)
            if self.found is None:
                raise ValidationError("No such topic.")

    @app.get("/")
    def page() -> str:
        return render_template_string(
            '<form method="post" action="/entries">{{ submit_once.input("enter") }}</form>'
        )

    @app.post("/entries")
    @submit_once.form(EntryForm, model=entry_model, done="entry")
    def enter(form: EntryForm, db: Any) -> Any:
        return entry_model(topic_id=form.found.id, topic_name=form.found.name)

    @app.get("/entries/<int:id>")
    def entry(id: int) -> str:
        return str(id)

    def close() -> None:
        with app.app_context():
            submit_once.redis.close()
        engine.dispose()

    return app, close
