"""A newsletter sign-up that subscribes once, however often the form is sent.

The whole pattern in one small app, as a plain HTML form (no JavaScript):
``form_tokens.form(...)`` names the protected form once and issues a token per
rendering; its ``submit`` spends the token with one GETDEL and runs the insert
in one transaction; the UNIQUE form_token_digest column backs Redis up, and the
fingerprint column tells a repeat from a changed resubmit (Back, edit, submit
again: 409, told, nothing saved). Back must show the form as it was rendered,
spent token included, or a resubmit would sign up twice: hence the form's page is
``private, no-cache`` without ``Vary: Cookie`` (``render`` and FormTokens see to
that) and posts to another URL. It imports only ``submit_once``. Run it with::

    export SECRET_KEY=dev DATABASE_URL=postgresql://localhost/newsletter \\
           REDIS_URL=redis://localhost:6379/0
    flask --app examples.newsletter.app run

examples/README.md shows the same form sent by htmx, Turbo and fetch().
"""

import os
import secrets

from flask import Flask, abort, render_template, url_for
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFError, CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import EmailField
from wtforms.validators import Email, InputRequired

from submit_once import FormTokens, Unavailable


class Base(DeclarativeBase):
    pass


class Subscription(Base):
    __tablename__ = "newsletter_subscriptions"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The confirmation's address: unguessable, unlike the id.
    public_id: Mapped[str] = mapped_column(String(22), unique=True,
                                           default=lambda: secrets.token_urlsafe(16))
    email: Mapped[str] = mapped_column(String(254))
    # The last line of defence: if Redis ever hands a spent token back, the
    # second insert fails here and the submit is answered as a duplicate.
    form_token_digest: Mapped[str] = mapped_column(String(43), unique=True)
    # A digest of what was sent: a resubmit of the same form with another
    # address is told so (409), not taken for a repeat of the first.
    fingerprint: Mapped[str] = mapped_column(String(43))



class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


PAGE = """<!doctype html><title>Newsletter</title>
<h1>Get our newsletter</h1>
{% if once.message %}<p role="alert">{{ once.message }}</p>{% endif %}
{% if once.existing_url %}<p><a href="{{ once.existing_url }}">The sign-up you sent first</a></p>
{% endif %}
<form method="post" action="{{ url_for('subscribe') }}">
  {{ form.csrf_token }} {{ form_token_input(form_token) }}
  {{ form.email.label }} {{ form.email() }}
  {% for error in form.email.errors %}<p>{{ error }}</p>{% endfor %}
  <button>Subscribe</button>
</form>"""
THANKS = """<!doctype html><title>Subscribed</title>
<h1>You are subscribed</h1>
<p>{{ subscription.email }} will get our newsletter. Sending the form again will not
subscribe you twice.</p>"""

form_tokens = FormTokens()
csrf = CSRFProtect()
newsletter = form_tokens.form("newsletter", template="newsletter.html", fields=["email"],
                              fingerprint_of=lambda subscription: subscription.fingerprint)


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        DATABASE_URL=os.environ.get("DATABASE_URL"),
        SUBMIT_ONCE_REDIS_URL=os.environ.get("REDIS_URL"),
    )
    app.config.update(config or {})
    app.jinja_loader = DictLoader({"newsletter.html": PAGE, "thanks.html": THANKS})
    engine = create_engine(app.config["DATABASE_URL"])
    Base.metadata.create_all(engine)
    # expire_on_commit=False: the subscription a submit returns is read after its commit.
    sessions = app.extensions["newsletter_db"] = sessionmaker(engine, expire_on_commit=False)
    form_tokens.init_app(app)
    csrf.init_app(app)

    @app.get("/")
    def sign_up():
        return newsletter.render(form=SignUpForm())

    # Not "/": a POST to a URL drops the browser's cached copy of it, so Back after
    # posting to the form's own URL would fetch the form afresh.
    @app.post("/subscribe")
    def subscribe():
        form = SignUpForm()
        if form.validate_on_submit():
            return newsletter.submit(              # GETDEL, then one transaction
                sessions=sessions, form=form,
                done=lambda subscription: url_for("thanks", public_id=subscription.public_id),
                create=lambda db, digest: subscribe_once(db, form.email.data, digest),
                find=lambda db, digest: db.scalar(
                    select(Subscription).where(Subscription.form_token_digest == digest)),
            )
        return newsletter.render(form=form)        # a typo: 422, the same token, still good

    @app.errorhandler(Unavailable)                 # Redis away: no token for a new form
    def unavailable(error: Unavailable):
        return "We could not reach our systems just now: please try again in a moment.", 503

    @app.errorhandler(CSRFError)                   # the session expired: input kept, 400
    def session_lost(error: CSRFError):
        return newsletter.recover(form=SignUpForm())

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        with sessions() as db:
            subscription = db.scalar(
                select(Subscription).where(Subscription.public_id == public_id))
        return render_template("thanks.html", subscription=subscription or abort(404))

    return app


def subscribe_once(db: Session, email: str, digest: str) -> Subscription:
    subscription = Subscription(email=email, form_token_digest=digest,
                                fingerprint=newsletter.fingerprint())
    db.add(subscription)
    db.flush()
    return subscription
