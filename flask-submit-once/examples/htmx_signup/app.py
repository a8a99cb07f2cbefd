"""An early-access page with two forms sent by htmx 2, each taking effect once.

The sign-up form is answered with a redirect (``HX-Redirect``) to its confirmation; the
question form is answered in place (``result_fragment``): what was sent, and a fresh
form for the next question. A typo (422, same token), a form already used (409, fresh
token) or an outage (503) comes back as the form's fragment, input kept; htmx swaps those
statuses because the page's ``htmx-config`` says so. Without JavaScript both forms are
plain POSTs and still work. On Flask-SQLAlchemy; run it from the examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/signup \\
           REDIS_URL=redis://localhost:6379/0
    flask --app htmx_signup.app run
"""

import os
import secrets

from flask import Flask, Response, render_template
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect, FlaskForm
from wtforms import EmailField, TextAreaField
from wtforms.validators import Email, InputRequired, Length

from flask_submit_once import SubmissionMixin, SubmitOnce

# htmx needs no inline script or style (its indicator <style> is switched off in
# signup.html), so the page runs under a strict policy.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

db = SQLAlchemy()
submit_once = SubmitOnce(sessions=db)
csrf = CSRFProtect()


def public_id() -> str:
    """A confirmation's address: unguessable, unlike the id."""
    return secrets.token_urlsafe(16)


class Signup(SubmissionMixin, db.Model):
    __tablename__ = "htmx_signups"
    id = db.Column(db.Integer, primary_key=True)
    public_id = db.Column(db.String(22), unique=True, nullable=False, default=public_id)
    email = db.Column(db.String(254), nullable=False)


class Question(SubmissionMixin, db.Model):
    __tablename__ = "htmx_questions"
    id = db.Column(db.Integer, primary_key=True)
    public_id = db.Column(db.String(22), unique=True, nullable=False, default=public_id)
    text = db.Column(db.String(500), nullable=False)


class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


class QuestionForm(FlaskForm):
    text = TextAreaField("Your question", validators=[InputRequired(), Length(max=500)])


def blank_question() -> dict:
    """The page's other form, empty: drawn beside the sign-up form, and after a question."""
    return {"question": QuestionForm(formdata=None)}


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

    @app.after_request
    def content_security_policy(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

    @app.get("/")
    def show_form():
        return render_template("signup.html", form=SignUpForm(), **blank_question())

    # Not "/": a POST to a URL drops the browser's cached copy of it, and Back must show
    # the form as it was, used token and all.
    @app.post("/signup")
    @submit_once.form(
        SignUpForm,
        model=Signup,
        done="thanks",
        template="signup.html",
        fragment="_signup_form.html",
        context=blank_question,
    )
    def sign_up(form, session):
        return Signup(email=form.email.data)

    @app.post("/questions")
    @submit_once.form(
        QuestionForm,
        model=Question,
        done="question",
        template="ask.html",
        fragment="_question_form.html",
        result_fragment="_question_sent.html",
        context=blank_question,
    )
    def ask(form, session):
        return Question(text=form.text.data)

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        signup = db.one_or_404(db.select(Signup).filter_by(public_id=public_id))
        return render_template("thanks.html", signup=signup)

    @app.get("/questions/<public_id>")
    def question(public_id: str):
        result = db.one_or_404(db.select(Question).filter_by(public_id=public_id))
        return render_template("question.html", result=result)

    return app
