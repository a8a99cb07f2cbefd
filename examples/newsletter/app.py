"""A newsletter sign-up that subscribes once, however often the form is sent.

The whole pattern in one small app: FormTokens issues a token per rendered
form, submit_once spends it with one GETDEL and runs the insert once, and the
UNIQUE form_token_digest column backs Redis up. It imports only
``submit_once``. Run it with
``flask --app examples.newsletter.app run`` (SECRET_KEY, DATABASE_URL and
REDIS_URL set); see docs/PATTERN.md for why each step is where it is.
"""

import os

from flask import Flask, redirect, render_template_string, url_for
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFProtect
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import EmailField
from wtforms.validators import Email, InputRequired

from submit_once import (
    Created,
    Duplicate,
    FormTokens,
    StillRunning,
    Unavailable,
    Unconfirmed,
)


class Base(DeclarativeBase):
    pass


class Subscription(Base):
    __tablename__ = "newsletter_subscriptions"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    # The last line of defence: if Redis ever hands a spent token back, the
    # second insert fails here and the submit is answered as a duplicate.
    form_token_digest: Mapped[str] = mapped_column(String(43), unique=True)


class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


PAGE = """<!doctype html><title>Newsletter</title>
<h1>Get our newsletter</h1>
{% if message %}<p role="alert">{{ message }}</p>{% endif %}
<form method="post">
  {{ form.csrf_token }} {{ form_token_input(token) }}
  {{ form.email.label }} {{ form.email() }}
  {% for error in form.email.errors %}<p>{{ error }}</p>{% endfor %}
  <button>Subscribe</button>
</form>"""

form_tokens = FormTokens()
csrf = CSRFProtect()


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        DATABASE_URL=os.environ.get("DATABASE_URL"),
        FORM_TOKENS_REDIS_URL=os.environ.get("REDIS_URL"),
    )
    app.config.update(config or {})
    engine = create_engine(app.config["DATABASE_URL"])
    Base.metadata.create_all(engine)
    sessions = app.extensions["newsletter_db"] = sessionmaker(engine)
    form_tokens.init_app(app)
    csrf.init_app(app)

    def page(form: SignUpForm, token: str, message: str = "", status: int = 200):
        return render_template_string(PAGE, form=form, token=token, message=message), status

    @app.errorhandler(Unavailable)                  # Redis or PostgreSQL away: nothing spent
    def unavailable(error: Unavailable):
        return "We are briefly unavailable: please try again in a moment.", 503

    @app.get("/")
    def sign_up():
        return page(SignUpForm(), form_tokens.issue("newsletter"))

    @app.post("/")
    def subscribe():
        token = form_tokens.submitted_token()      # 400 if missing or malformed
        form = SignUpForm()
        if not form.validate():                     # typo: same token, still valid
            return page(form, token, status=422)
        try:
            outcome = form_tokens.submit_once(      # GETDEL, then one transaction
                "newsletter", token, sessions=sessions,
                create=lambda db, digest: subscribe_once(db, form.email.data, digest),
                find=lambda db, digest: db.scalar(
                    select(Subscription.id).where(Subscription.form_token_digest == digest)),
            )
        except Unavailable:                         # the token is still good: keep it
            return page(form, token, "We could not reach our list just now; nothing was "
                                     "saved. Please submit again in a moment.", 503)
        match outcome:
            case Created() | Duplicate():           # the first submit, or any repeat of it
                return redirect(url_for("thanks"), 303)
            case StillRunning():
                return "Still subscribing you: reload in a moment.", 503
            case Unconfirmed():                     # the COMMIT may have landed: same token
                return page(form, token, "We could not confirm your sign-up; please "
                                         "submit again in a moment.", 503)
            case _:                                 # Expired or Failed: nothing was saved
                return page(form, form_tokens.issue("newsletter"),
                            "Nothing was saved yet: please submit again.", 409)

    @app.get("/thanks")
    def thanks():
        return "You are subscribed. Sending the form again will not subscribe you twice."

    return app


def subscribe_once(db: Session, email: str, digest: str) -> int:
    subscription = Subscription(email=email, form_token_digest=digest)
    db.add(subscription)
    db.flush()
    return subscription.id
