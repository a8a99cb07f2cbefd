"""A lean Flask app as a user writes it, bare and with the library, for the benchmark:
Flask-WTF, Jinja, the SQLAlchemy ORM (Flask-SQLAlchemy, its defaults), a UNIQUE column,
Post/Redirect/Get. Three variants, each its own Flask app, so that the bare ones carry
none of the library's hooks, mounted beside the shop by :func:`mount`:

**lean** (/lean): the form, ``validate()``, an INSERT with a random value in the UNIQUE
column, COMMIT, 303 to the entry's page.

**lean_floor** (/lean-floor): the same plus the two bare Redis commands any store-backed
token costs, ``SET floor:<token> 1 EX 3600 NX`` at render and ``GETDEL`` at submit (the
token in the UNIQUE column): the least a Redis-backed token can cost this app.

**lean_once** (/lean-once): the library's README pattern: ``SubmitOnce(app, sessions=db)``,
:class:`~flask_submit_once.SubmissionMixin` on the model, ``@submit_once.form(...)`` on
the POST view, ``submit_once.input(...)`` in the template.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import redis
from flask import Flask, abort, redirect, render_template, request, url_for
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect, FlaskForm
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from wtforms import EmailField, IntegerField, StringField
from wtforms.validators import Email, InputRequired, Length, NumberRange

from flask_submit_once import SubmissionMixin, SubmitOnce

from .load import LEAN_PREFIXES

#: The library's caps on forms issued, which the benchmark's users would trip.
CAPS = ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE")
db = SQLAlchemy()


class Entry(db.Model):  # type: ignore[name-defined,misc]
    """What the bare variants write: the user's own UNIQUE column."""

    __tablename__ = "lean_entries"
    id = db.Column(db.Integer, primary_key=True)
    public_id = db.Column(
        db.String(22), unique=True, nullable=False, default=lambda: secrets.token_urlsafe(16)
    )
    name = db.Column(db.String(100), nullable=False)
    email = db.Column(db.String(254), nullable=False)
    quantity = db.Column(db.Integer, nullable=False)
    form_token = db.Column(db.String(43), unique=True, nullable=False)


class OnceEntry(SubmissionMixin, db.Model):  # type: ignore[name-defined,misc]
    """What the library's variant writes: the mixin's UNIQUE digest and fingerprint."""

    __tablename__ = "lean_once_entries"
    id = db.Column(db.Integer, primary_key=True)
    public_id = db.Column(
        db.String(22), unique=True, nullable=False, default=lambda: secrets.token_urlsafe(16)
    )
    name = db.Column(db.String(100), nullable=False)
    email = db.Column(db.String(254), nullable=False)
    quantity = db.Column(db.Integer, nullable=False)


class EntryForm(FlaskForm):
    name = StringField("Name", validators=[InputRequired(), Length(max=100)])
    email = EmailField("Email", validators=[InputRequired(), Email()])
    quantity = IntegerField("Quantity", validators=[InputRequired(), NumberRange(1, 99)])


def make_app(variant: str) -> Flask:
    """One variant's app, configured from the benchmark's environment."""
    app = Flask(__name__, template_folder=str(Path(__file__).with_name("templates")))
    app.config.update(
        SECRET_KEY=os.environ["SECRET_KEY"],
        # another store than the shop's (bench/stores.py)
        SQLALCHEMY_DATABASE_URI=os.environ.get("LEAN_DATABASE_URL") or os.environ["DATABASE_URL"],
        REDIS_URL=os.environ["REDIS_URL"],
    )
    if os.environ.get("DATABASE_POOLER") == "transaction":
        # psycopg's advice for PgBouncer pooling by transaction, as a user's app behind one
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {"connect_args": {"prepare_threshold": None}}
    # lifted as for the shop (bench/servers.py)
    for cap in CAPS:
        if cap in os.environ:
            app.config[cap] = int(os.environ[cap])
    db.init_app(app)
    CSRFProtect(app)
    if variant == "lean_once":
        once(app)
    else:
        bare(
            app, redis.Redis.from_url(app.config["REDIS_URL"]) if variant == "lean_floor" else None
        )

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        model = OnceEntry if variant == "lean_once" else Entry
        entry = db.one_or_404(db.select(model).filter_by(public_id=public_id))
        return render_template("lean/thanks.html", entry=entry)

    return app


def bare(app: Flask, client: redis.Redis | None) -> None:
    """The form without the library; with ``client``, the floor's two commands."""

    @app.get("/new")
    def new():
        token = secrets.token_urlsafe(32)
        if client is not None:
            client.set(f"floor:{token}", 1, ex=3600, nx=True)
        return render_template("lean/new.html", form=EntryForm(), token=token)

    @app.post("/send")
    def send():
        token = request.form.get("form_token", "")
        if client is not None and client.getdel(f"floor:{token}") is None:
            abort(409)
        form = EntryForm()
        if not form.validate():
            return render_template("lean/new.html", form=form, token=token), 422
        entry = Entry(
            name=form.name.data,
            email=form.email.data,
            quantity=form.quantity.data,
            form_token=token[:43],
        )
        db.session.add(entry)
        db.session.commit()
        return redirect(url_for("thanks", public_id=entry.public_id), 303)


def once(app: Flask) -> None:
    """The README's pattern."""
    submit_once = SubmitOnce(app, sessions=db)

    @app.get("/new")
    def new():
        return render_template("lean/new.html", form=EntryForm())

    @app.post("/send")
    @submit_once.form(EntryForm, model=OnceEntry, template="lean/new.html", done="thanks")
    def send(form, session):
        return OnceEntry(name=form.name.data, email=form.email.data, quantity=form.quantity.data)


def mount(app: Flask) -> None:
    """The three variants beside ``app``, under bench.load's ``LEAN_PREFIXES``."""
    app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, {prefix: make_app(variant) for variant, prefix in LEAN_PREFIXES.items()}
    )


def create_tables(database_url: str) -> None:
    """The variants' tables, once, before the workers start."""
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = database_url
    db.init_app(app)
    with app.app_context():
        db.create_all()
        db.engine.dispose()
