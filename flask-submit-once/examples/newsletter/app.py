"""A newsletter sign-up that subscribes once, however often the form is sent.

A plain HTML form, no JavaScript, on a sessionmaker and a plain declarative model
(the quick start in the README is the same on Flask-SQLAlchemy). Run it from the
examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/newsletter \\
           REDIS_URL=redis://localhost:6379/0
    flask --app newsletter.app run
"""

import os
import secrets

from flask import Flask, abort, render_template
from flask_wtf import CSRFProtect, FlaskForm
from jinja2 import DictLoader
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from wtforms import EmailField
from wtforms.validators import Email, InputRequired

from flask_submit_once import SubmissionMixin, SubmitOnce


class Base(DeclarativeBase):
    pass


class Subscription(SubmissionMixin, Base):
    """One sign-up; the mixin adds the UNIQUE token digest and the fingerprint."""

    __tablename__ = "newsletter_subscriptions"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The confirmation's address: unguessable, unlike the id.
    public_id: Mapped[str] = mapped_column(
        String(22), unique=True, default=lambda: secrets.token_urlsafe(16)
    )
    email: Mapped[str] = mapped_column(String(254))


class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


PAGE = """<!doctype html><title>Newsletter</title>
<h1>Get our newsletter</h1>
{% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
{% if submit_once.existing_url %}
<p><a href="{{ submit_once.existing_url }}">The sign-up you sent first</a></p>
{% endif %}
<form method="post" action="{{ url_for('subscribe') }}">
  {{ form.csrf_token }} {{ submit_once.input("subscribe") }}
  {{ form.email.label }} {{ form.email() }}
  {% for error in form.email.errors %}<p>{{ error }}</p>{% endfor %}
  <button>Subscribe</button>
</form>"""
THANKS = """<!doctype html><title>Subscribed</title>
<h1>You are subscribed</h1>
<p>{{ subscription.email }} will get our newsletter. Sending the form again will not
subscribe you twice.</p>"""

submit_once = SubmitOnce()
csrf = CSRFProtect()


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        DATABASE_URL=os.environ.get("DATABASE_URL"),
        REDIS_URL=os.environ.get("REDIS_URL"),
        # Back shows a form as it was, used token and all (it replaces Flask's session
        # interface, so the app opts in).
        SUBMIT_ONCE_BACK_SHOWS_FORM=True,
    )
    app.config.update(config or {})
    app.jinja_loader = DictLoader({"newsletter.html": PAGE, "thanks.html": THANKS})
    engine = create_engine(app.config["DATABASE_URL"])
    Base.metadata.create_all(engine)
    submit_once.init_app(app, sessions=sessionmaker(engine))
    csrf.init_app(app)

    @app.get("/")
    def sign_up():
        return render_template("newsletter.html", form=SignUpForm())

    # Not "/": a POST to a URL drops the browser's cached copy of it, and Back must show
    # the form as it was, used token and all.
    @app.post("/subscribe")
    @submit_once.form(SignUpForm, model=Subscription, template="newsletter.html", done="thanks")
    def subscribe(form, session):
        return Subscription(email=form.email.data)

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        subscription = submit_once.session.scalar(
            select(Subscription).where(Subscription.public_id == public_id)
        )
        return render_template("thanks.html", subscription=subscription or abort(404))

    return app
