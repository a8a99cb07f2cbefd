"""A page of several forms of one endpoint, as the library's users draw one: each item of a
list has its own rating form (``rate`` with the item's id in its URL), and each form asks
``submit_once.answered("rate", item=...)`` whether the page answers its submit. Beside it,
a suggestion box whose ``context`` draws the form itself, and whose ``done`` is given by
the app's factory (to try one that names a URL value the model lacks)."""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import IntegerField, StringField
from wtforms.validators import InputRequired, Length, NumberRange

from flask_submit_once import SubmissionMixin, SubmitOnce

submit_once = SubmitOnce()
csrf = CSRFProtect()
ITEMS = {1: "Tea", 2: "Coffee"}


class Base(DeclarativeBase):
    pass


class Rating(SubmissionMixin, Base):
    __tablename__ = "ratings"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[int]
    stars: Mapped[int]


class Suggestion(SubmissionMixin, Base):
    __tablename__ = "suggestions"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(80))


class RateForm(FlaskForm):
    stars = IntegerField("Stars", validators=[InputRequired(), NumberRange(1, 5)])


class SuggestForm(FlaskForm):
    title = StringField("Title", validators=[InputRequired(), Length(max=80)])


def suggest_form() -> SuggestForm:
    """The suggestion box as its page draws it: with this week's hint (from the request's
    input when there is some, as any FlaskForm)."""
    form = SuggestForm()
    form.title.description = "What should we stock next?"
    return form


ITEMS_PAGE = """<!doctype html><html><title>Items</title>
{% for item, title in items.items() %}
{% set answer = submit_once.answered("rate", item=item) %}
<form id="rate-{{ item }}" method="post" action="{{ url_for('rate', item=item) }}">
  <h2>{{ title }}</h2>
  {% if answer %}<p role="alert">{{ answer.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("rate", item=item) }}
  <input name="stars"
         value="{{ form.stars.raw_data[0] if answer and form.stars.raw_data else '' }}">
  {% if answer %}{% for errors in form.errors.values() %}
    <p class="error">{{ errors|join(" ") }}</p>{% endfor %}{% endif %}
  <button>Rate</button>
</form>
{% endfor %}</html>"""
SUGGEST_PAGE = """<!doctype html><html><title>Suggest</title>
<form method="post" action="{{ url_for('suggest') }}">
  {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("suggest") }}
  <label>{{ form.title.description }}
    <input name="title" value="{{ form.title.data or '' }}"></label>
</form></html>"""


def create_app(
    sessions: sessionmaker[Session], suggestion_done: str = "suggestion", **config: Any
) -> Flask:
    app = Flask(__name__)
    app.config.update({"SECRET_KEY": "ratings", "TESTING": True, **config})
    app.jinja_loader = DictLoader({"items.html": ITEMS_PAGE, "suggest.html": SUGGEST_PAGE})
    submit_once.init_app(app, sessions=sessions)
    csrf.init_app(app)

    @app.get("/items")
    def items() -> str:
        return render_template("items.html", items=ITEMS, form=None)

    @app.post("/items/<int:item>/ratings")
    @submit_once.form(
        RateForm,
        model=Rating,
        template="items.html",
        done="rating",
        context=lambda: {"items": ITEMS},
    )
    def rate(form: RateForm, db: Session, item: int) -> Rating:
        return Rating(item=item, stars=form.stars.data)

    @app.get("/ratings/<int:id>")
    def rating(id: int) -> str:
        return str(id)

    @app.get("/suggest")
    def suggest_page() -> str:
        return render_template("suggest.html", form=suggest_form())

    @app.post("/suggestions")
    @submit_once.form(
        SuggestForm,
        model=Suggestion,
        template="suggest.html",
        done=suggestion_done,
        context=lambda: {"form": suggest_form()},
    )
    def suggest(form: SuggestForm, db: Session) -> Suggestion:
        return Suggestion(title=form.title.data)

    @app.get("/suggestions/<int:id>")
    def suggestion(id: int) -> str:
        return str(id)

    @app.get("/suggestions/by-slug/<slug>")
    def suggestion_by_slug(slug: str) -> str:
        return request.path

    return app
