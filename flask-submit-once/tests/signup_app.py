"""The app the library's form tests drive: one sign-up form, protected in a few lines,
answering plain POSTs, htmx and fetch; and a second form on the same page."""

from __future__ import annotations

from flask import Flask, request, url_for
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFError, CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from wtforms import StringField
from wtforms.validators import Email, InputRequired

from submit_once import FormTokens, Unavailable
from tests_support import Signup

FORM = """<form method="post" action="/signup" hx-post="/signup">
  {% if once.message %}<p role="alert">{{ once.message }}</p>{% endif %}
  {% if once.existing_url %}<a href="{{ once.existing_url }}">what you sent first</a>{% endif %}
  {{ form.csrf_token }} {{ form_token_input(form_token) }}
  {{ form.email() }} {% for error in form.email.errors %}<p>{{ error }}</p>{% endfor %}
  <button>Sign up</button>
</form>"""
PAGE = """<!doctype html><html><title>Sign up</title>{% include "_form.html" %}
<form method="post" action="/feedback">{{ form_token_input(once.tokens.feedback) }}</form>
</html>"""

form_tokens = FormTokens()
csrf = CSRFProtect()
signup = form_tokens.form("signup", template="signup.html", fragment="_form.html",
                          fields=["email"], fingerprint_of=lambda row: row[1],
                          with_forms=["feedback"])


class SignUpForm(FlaskForm):
    email = StringField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


def create_app(redis_url: str, sessions: sessionmaker[Session], **config: object) -> Flask:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", REDIS_URL=redis_url,
                      SUBMIT_ONCE_MAX_PER_CLIENT_PER_MINUTE=0, **config)
    app.jinja_loader = DictLoader({"signup.html": PAGE, "_form.html": FORM})
    form_tokens.init_app(app)
    csrf.init_app(app)

    @app.route("/signup", methods=["GET", "POST"])
    def sign_up():
        form = SignUpForm(meta={"csrf": app.config.get("WTF_CSRF_ENABLED", True)})
        if form.validate_on_submit():
            return signup.submit(
                sessions=sessions, form=form, done=lambda row: url_for("thanks", id=row[0]),
                create=lambda db, digest: add_signup(db, form.email.data, digest),
                find=lambda db, digest: db.execute(select(Signup.id, Signup.fingerprint)
                                                   .where(Signup.token_digest == digest)).first())
        return signup.render(form=form)

    @app.errorhandler(Unavailable)  # a page whose tokens Redis could not give: once
    def unavailable(error: Unavailable):
        return "We could not reach our systems just now: try again in a moment.", 503

    @app.errorhandler(CSRFError)
    def session_lost(error: CSRFError):
        return signup.recover(form=SignUpForm())  # the input, and a fresh CSRF token

    @app.get("/thanks/<int:id>")
    def thanks(id: int):
        with sessions() as db:
            return {"signups": db.scalar(select(func.count()).select_from(Signup)), "id": id,
                    "email": db.get(Signup, id).email, "args": request.args}

    return app


def add_signup(db: Session, email: str, digest: str) -> tuple[int, str | None]:
    row = Signup(email=email, token_digest=digest, fingerprint=signup.fingerprint())
    db.add(row)
    db.flush()
    return row.id, row.fingerprint
