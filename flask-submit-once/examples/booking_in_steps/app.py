"""An appointment booked in two steps (who is coming, then which day) that is booked
once, however often the user goes Back and forward between the steps.

The first step's page is issued the token of the last step's form; the first step's
view carries it to the second step's page (``submit_once.carry_token``), consuming
nothing, so Back and Next draw the same token again and only the last step, the one that
books, takes effect. The forms are sent by htmx 2 (``static/``), which swaps each step in
place; without JavaScript they are plain forms, each step a page, and the Python is the
same. On Flask-SQLAlchemy; run it from the examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/booking \\
           REDIS_URL=redis://localhost:6379/0
    flask --app booking_in_steps.app run
"""

import os
import secrets
from datetime import date

from flask import Flask, Response, render_template
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect, FlaskForm
from wtforms import DateField, EmailField, StringField, ValidationError
from wtforms.validators import Email, InputRequired, Length

from flask_submit_once import SubmissionMixin, SubmitOnce

# htmx needs no inline script or style (its indicator <style> is switched off in
# layout.html), so the pages run under a strict policy.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

db = SQLAlchemy()
submit_once = SubmitOnce(sessions=db)
csrf = CSRFProtect()


class Appointment(SubmissionMixin, db.Model):
    __tablename__ = "appointments_in_steps"
    id = db.Column(db.Integer, primary_key=True)
    # The confirmation's address: unguessable, unlike the id.
    public_id = db.Column(
        db.String(22), unique=True, nullable=False, default=lambda: secrets.token_urlsafe(16)
    )
    name = db.Column(db.String(80), nullable=False)
    email = db.Column(db.String(254), nullable=False)
    day = db.Column(db.Date, nullable=False)


class DetailsForm(FlaskForm):
    """The first step: who is coming."""

    name = StringField("Name", validators=[InputRequired(), Length(max=80)])
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


class AppointmentForm(DetailsForm):
    """The whole booking: the first step's fields, carried, and the day."""

    day = DateField("Day", validators=[InputRequired()])

    def validate_day(self, field: DateField) -> None:
        # None when what was sent is no date: DateField says so itself
        if field.data is not None and field.data < date.today():
            raise ValidationError("Choose a day from today on.")


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL"),
        REDIS_URL=os.environ.get("REDIS_URL"),
        # Back shows each step as it was, its token and input (it replaces Flask's
        # session interface, so the app opts in).
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

    # Each step on a URL of its own: a POST to a URL drops the browser's cached copy of
    # it, and Back must show each step as it was.
    @app.get("/")
    def details():
        # Issues the token of the form that books: submit_once.input("book").
        return render_template("details.html", form=DetailsForm())

    @app.post("/day")
    def choose_day():
        submit_once.carry_token("book")
        form = DetailsForm()
        if not form.validate():
            return render_template("details.html", form=form), 422
        # The whole booking's form, with the first step's input.
        return render_template("day.html", form=AppointmentForm())

    @app.post("/book")
    @submit_once.form(AppointmentForm, model=Appointment, template="day.html", done="booked")
    def book(form, session):
        return Appointment(name=form.name.data, email=form.email.data, day=form.day.data)

    @app.get("/booked/<public_id>")
    def booked(public_id: str):
        appointment = db.one_or_404(db.select(Appointment).filter_by(public_id=public_id))
        return render_template("booked.html", appointment=appointment)

    return app
