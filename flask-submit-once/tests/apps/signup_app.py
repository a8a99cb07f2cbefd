"""The app the library's suite drives, written as a user of the library writes one: a
sign-up form (plain POST, Turbo, htmx, fetch), a feedback form on the same page that htmx
answers in place, a JSON-only newsletter form with no template, a referral letter sent as a
file upload, and an API with an ``Idempotency-Key``; each protected in a few lines, on a
plain ``sessionmaker``."""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFProtect
from flask_wtf.file import FileField, FileRequired
from jinja2 import DictLoader
from sqlalchemy import LargeBinary, String, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from werkzeug.exceptions import BadRequest
from wtforms import IntegerField, StringField, TextAreaField, ValidationError
from wtforms.validators import Email, InputRequired, Length, NumberRange

from flask_submit_once import Refused, SubmissionMixin, SubmitOnce

submit_once = SubmitOnce()
csrf = CSRFProtect()


class Base(DeclarativeBase):
    pass


class Signup(SubmissionMixin, Base):
    __tablename__ = "signups"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    name: Mapped[str] = mapped_column(String(80), default="")
    quantity: Mapped[int] = mapped_column(default=1)


class Comment(SubmissionMixin, Base):
    __tablename__ = "comments"
    id: Mapped[int] = mapped_column(primary_key=True)
    text: Mapped[str] = mapped_column(String(500))


class Subscription(SubmissionMixin, Base):
    __tablename__ = "subscriptions"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254))


class Letter(SubmissionMixin, Base):
    __tablename__ = "letters"
    id: Mapped[int] = mapped_column(primary_key=True)
    note: Mapped[str] = mapped_column(String(200))
    filename: Mapped[str] = mapped_column(String(200))
    content: Mapped[bytes] = mapped_column(LargeBinary)


def strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


class DetailsForm(FlaskForm):
    """The first step of the sign-up in two steps: who signs up."""

    email = StringField(
        "Email", filters=[strip], validators=[InputRequired(), Email(check_deliverability=False)]
    )
    name = StringField("Name", filters=[strip], validators=[Length(max=80)])


class SignUpForm(DetailsForm):
    quantity = IntegerField("Seats", default=1, validators=[NumberRange(1, 10)])

    def validate_email(self, field: StringField) -> None:
        """An address signs up once: a rule that stops holding once the signup lands."""
        if submit_once.session.scalar(select(Signup.id).where(Signup.email == field.data)):
            raise ValidationError("This address has already signed up.")


class CommentForm(FlaskForm):
    text = TextAreaField("Comment", filters=[strip], validators=[InputRequired(), Length(max=500)])


class SubscribeForm(FlaskForm):
    email = StringField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


class LetterForm(FlaskForm):
    note = StringField("Note", filters=[strip], validators=[InputRequired(), Length(max=200)])
    letter = FileField("Referral letter", validators=[FileRequired()])


SIGNUP_FORM = """\
{% set mine = form is defined and submit_once.form == "sign_up" %}
{% set action = url_for('sign_up') %}
<form id="signup" method="post" action="{{ action }}" hx-post="{{ action }}">
  {% if mine and submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  {% if mine and submit_once.existing_url %}
    <a href="{{ submit_once.existing_url }}">what you sent first</a>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("sign_up") }}
  <input name="email" value="{{ form.email.data or '' if mine else '' }}">
  <input name="name" value="{{ form.name.data or '' if mine else '' }}">
  <input name="quantity"
         value="{{ form.quantity.raw_data[0] if mine and form.quantity.raw_data else 1 }}">
  {% if mine %}{% for field, errors in form.errors.items() %}
    <p class="error">{{ field }}: {{ errors|join(" ") }}</p>{% endfor %}{% endif %}
  <button>Sign up</button>
</form>"""
COMMENT_FORM = """\
{% set mine = form is defined and submit_once.form == "comment" %}
{% set action = url_for('comment') %}
<form id="comment" method="post" action="{{ action }}" hx-post="{{ action }}">
  {% if mine and submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("comment") }}
  <textarea name="text">{{ form.text.data or '' if mine else '' }}</textarea>
  <button>Send</button>
</form>"""
COMMENTED = """<p class="comment" id="comment-{{ result.id }}">{{ result.text }}</p>
{% include "_comment_form.html" %}"""
LETTER_FORM = """\
{% set mine = form is defined and submit_once.form == "send_letter" %}
<form id="letter" method="post" action="{{ url_for('send_letter') }}" enctype="multipart/form-data">
  {% if mine and submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("send_letter") }}
  <input name="note" value="{{ form.note.data or '' if mine else '' }}">
  <input type="file" name="letter">
  {% for error in (form.letter.errors if mine else []) %}
    <p class="error">{{ error }}</p>{% endfor %}
  {% if mine and submit_once.kept_file("letter") %}
    <p class="kept">Kept: {{ submit_once.kept_file("letter") }}</p>{% endif %}
  <button>Send</button>
</form>"""
LETTERS_PAGE = """<!doctype html><html><title>Referral</title>
{% include "_letter.html" %}
</html>"""
PAGE = """<!doctype html><html><title>Sign up</title>
{% include "_signup_form.html" %}
{% include "_comment_form.html" %}
<div id="newsletter" data-token="{{ submit_once.token('subscribe') or '' }}"></div>
</html>"""
STEP_DETAILS = """<!doctype html><html><title>Sign up: who</title>
<form method="post" action="{{ url_for('choose_seats') }}">
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("sign_up_in_steps") }}
  <input name="email" value="{{ form.email.data or '' if form else '' }}">
  <input name="name" value="{{ form.name.data or '' if form else '' }}">
  {% if form %}{% for field, errors in form.errors.items() %}
    <p class="error">{{ field }}: {{ errors|join(" ") }}</p>{% endfor %}{% endif %}
  <button>Next</button>
</form>
</html>"""
STEP_SEATS = """<!doctype html><html><title>Sign up: seats</title>
<form method="post" action="{{ url_for('sign_up_in_steps') }}">
  {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("sign_up_in_steps") }}
  <input type="hidden" name="email" value="{{ form.email.data or '' }}">
  <input type="hidden" name="name" value="{{ form.name.data or '' }}">
  <p>{{ form.email.data }}</p>
  <input name="quantity"
         value="{{ form.quantity.raw_data[0] if form.quantity.raw_data else 1 }}">
  {% for field, errors in form.errors.items() %}
    <p class="error">{{ field }}: {{ errors|join(" ") }}</p>{% endfor %}
  <button>Confirm</button>
</form>
</html>"""
TEMPLATES = {
    "page.html": PAGE,
    "_signup_form.html": SIGNUP_FORM,
    "_comment_form.html": COMMENT_FORM,
    "_commented.html": COMMENTED,
    "letters.html": LETTERS_PAGE,
    "_letter.html": LETTER_FORM,
    "steps_details.html": STEP_DETAILS,
    "steps_seats.html": STEP_SEATS,
}


def create_app(sessions: sessionmaker[Session], **config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"SECRET_KEY": "test", "TESTING": True, **config})
    app.jinja_loader = DictLoader(TEMPLATES)
    submit_once.init_app(app, sessions=sessions)
    csrf.init_app(app)

    @app.get("/signup")
    def signup_page() -> str:
        return render_template("page.html")

    @app.post("/signup/send")
    @submit_once.form(
        SignUpForm, model=Signup, template="page.html", fragment="_signup_form.html", done="thanks"
    )
    def sign_up(form: SignUpForm, db: Session) -> Signup:
        if app.config.get("SIGNUPS_CLOSED"):
            raise Refused("Sign-ups closed a moment ago.")
        return Signup(email=form.email.data, name=form.name.data, quantity=form.quantity.data)

    @app.get("/thanks/<int:id>")
    def thanks(id: int) -> dict[str, Any]:
        with sessions() as db:
            row = db.get(Signup, id)
            return {
                "id": id,
                "email": row.email if row else None,
                "signups": db.scalar(select(func.count()).select_from(Signup)),
            }

    @app.get("/signup/steps")
    def sign_up_details() -> str:
        return render_template("steps_details.html", form=None)

    @app.post("/signup/steps/seats")
    def choose_seats() -> tuple[str, int]:
        submit_once.carry_token("sign_up_in_steps")
        details = DetailsForm()
        if not details.validate():
            return render_template("steps_details.html", form=details), 422
        return render_template("steps_seats.html", form=SignUpForm()), 200

    @app.post("/signup/steps/confirm")
    @submit_once.form(SignUpForm, model=Signup, template="steps_seats.html", done="thanks")
    def sign_up_in_steps(form: SignUpForm, db: Session) -> Signup:
        return Signup(email=form.email.data, name=form.name.data, quantity=form.quantity.data)

    @app.post("/comments")
    @submit_once.form(
        CommentForm,
        model=Comment,
        template="page.html",
        fragment="_comment_form.html",
        result_fragment="_commented.html",
        done="comment_page",
    )
    def comment(form: CommentForm, db: Session) -> Comment:
        return Comment(text=form.text.data)

    @app.get("/comments/<int:id>")
    def comment_page(id: int) -> str:
        with sessions() as db:
            row = db.get(Comment, id)
            return row.text if row else ""

    @app.post("/newsletter")
    @submit_once.form(SubscribeForm, model=Subscription, done="subscription")
    def subscribe(form: SubscribeForm, db: Session) -> Subscription:
        return Subscription(email=form.email.data)

    @app.get("/newsletter/<int:id>")
    def subscription(id: int) -> dict[str, Any]:
        return {"id": id}

    @app.get("/letters")
    def letter_page() -> str:
        return render_template("letters.html")

    @app.post("/letters/send")
    @submit_once.form(LetterForm, model=Letter, template="letters.html", done="letter")
    def send_letter(form: LetterForm, db: Session) -> Letter:
        # The whole file, as the view sees it after the library has read it.
        upload = form.letter.data
        return Letter(note=form.note.data, filename=upload.filename, content=upload.read())

    @app.get("/letters/<int:id>")
    def letter(id: int) -> dict[str, Any]:
        with sessions() as db:
            row = db.get(Letter, id)
            return {"id": id, "filename": row.filename if row else None}

    @app.post("/api/signups")
    @csrf.exempt
    @submit_once.idempotent(
        key=lambda: request.headers["Idempotency-Key"],
        model=Signup,
        scope=lambda: request.headers.get("X-Client", ""),
        respond=lambda row: ({"id": row.id, "email": row.email}, 201),
        # A retry while the first still runs is told at once (409, Retry-After).
        wait=0,
    )
    def api_sign_up(db: Session) -> Signup:
        body = request.get_json()
        if body.get("refuse"):
            raise Refused("Sign-ups are closed.")
        if "@" not in body.get("email", ""):
            raise BadRequest("email: not an address")
        return Signup(email=body["email"])

    @app.post("/webhooks/signups")
    @csrf.exempt
    @submit_once.idempotent(
        key=lambda: request.get_json()["event_id"],
        name="webhook:signups",
        scope=lambda: "provider",
        model=Signup,
        respond=lambda row: ({"id": row.id}, 200),
    )
    def signup_webhook(db: Session) -> Signup:
        return Signup(email=request.get_json()["email"])

    return app
