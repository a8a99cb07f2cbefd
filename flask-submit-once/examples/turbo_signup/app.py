"""An early-access sign-up under Turbo Drive (Hotwire) that signs up once, however often
it is sent.

Turbo sends the form with fetch() and renders the answer, so the form is a plain
POST form and the library answers it as one: success is a 303 to the confirmation
(Turbo accepts a successful POST only as a redirect); a typo (422, same token) or
a form already used (409, fresh token) is the page again with the input kept,
which Turbo renders because it is a 4xx (it renders 4xx and 5xx HTML answers to a
form, never a 200). ``data-turbo-submits-with`` relabels the button, which Turbo
disables while a submit is in flight: comfort only; the token, spent with one
GETDEL, and the UNIQUE column make the sign-up happen once. Turbo keeps no snapshot
of a page after a POST from it, so Back fetches the form afresh (a new token, no
input); without JavaScript the form is a plain POST, and Back shows it as sent.

On Flask-SQLAlchemy; Turbo 8.0.23 is in ``static/``. Run it from the examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/signup \\
           REDIS_URL=redis://localhost:6379/0
    flask --app turbo_signup.app run
"""

import os
import secrets

from flask import Flask, Response, g, render_template
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect, FlaskForm
from wtforms import EmailField
from wtforms.validators import Email, InputRequired

from flask_submit_once import SubmissionMixin, SubmitOnce

# Turbo's progress bar is an inline <style>: it carries the nonce of the page Turbo
# started on (read from <meta name="csp-nonce">); nothing else inline is allowed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; "
    "style-src 'self' 'nonce-{nonce}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)

db = SQLAlchemy()
submit_once = SubmitOnce(sessions=db)
csrf = CSRFProtect()


class Signup(SubmissionMixin, db.Model):
    __tablename__ = "turbo_signups"
    id = db.Column(db.Integer, primary_key=True)
    # The confirmation's address: unguessable, unlike the id.
    public_id = db.Column(
        db.String(22), unique=True, nullable=False, default=lambda: secrets.token_urlsafe(16)
    )
    email = db.Column(db.String(254), nullable=False)


class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL"),
        REDIS_URL=os.environ.get("REDIS_URL"),
        # Back shows a form as it was, used token and all (it replaces Flask's session
        # interface, so the app opts in).
        SUBMIT_ONCE_BACK_SHOWS_FORM=True,
    )
    app.config.update(config or {})
    db.init_app(app)
    submit_once.init_app(app)
    csrf.init_app(app)
    with app.app_context():
        db.create_all()
    app.jinja_env.globals["csp_nonce"] = csp_nonce

    @app.after_request
    def content_security_policy(response: Response) -> Response:
        response.headers.setdefault(
            "Content-Security-Policy", CONTENT_SECURITY_POLICY.format(nonce=csp_nonce())
        )
        return response

    @app.get("/")
    def show_form():
        return render_template("signup.html", form=SignUpForm())

    # Not "/": a POST to a URL drops the browser's cached copy of it.
    @app.post("/signup")
    @submit_once.form(SignUpForm, model=Signup, template="signup.html", done="thanks")
    def sign_up(form, session):
        return Signup(email=form.email.data)

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        signup = db.one_or_404(db.select(Signup).filter_by(public_id=public_id))
        return render_template("thanks.html", signup=signup)

    return app


def csp_nonce() -> str:
    """This response's Content-Security-Policy nonce."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce
