"""A referral letter sent with a form, taking effect once, the letter's bytes part of what
was sent, and the letter kept when the form comes back.

A patient's details and their doctor's letter (a PDF or an image, at most 2 MiB) are sent
by htmx 2 (``hx-encoding="multipart/form-data"``) or, without JavaScript, as a plain form;
the Python is the same. The same letter sent again (a double click, Back and send) lands on
the first referral; another letter sent with a used token, even one of the same name, is
told it differs (409, the input kept), never dropped. A form that comes back with another
field invalid (422) keeps the letter: the page names it, and sending the form again without
picking it carries it. On Flask-SQLAlchemy; run it from the examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/referrals \\
           REDIS_URL=redis://localhost:6379/0
    flask --app referral_letter.app run
"""

import hashlib
import os
import secrets
from datetime import date

from flask import Flask, Response, render_template, request
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect, FlaskForm
from flask_wtf.file import FileAllowed, FileField, FileRequired, FileSize
from werkzeug.utils import secure_filename
from wtforms import DateField, StringField, ValidationError
from wtforms.validators import InputRequired, Length

from flask_submit_once import SubmissionMixin, SubmitOnce

# htmx needs no inline script or style (its indicator <style> is switched off in
# layout.html), so the pages run under a strict policy.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: The largest letter taken; a larger one is told so by the form (422, the rest kept).
LETTER_BYTES = 2 * 1024 * 1024
#: The largest request read at all (Werkzeug answers 413 past it, before the token is
#: read): room for a letter a little too large to be told so, and the other fields.
REQUEST_BYTES = 4 * LETTER_BYTES

db = SQLAlchemy()
submit_once = SubmitOnce(sessions=db)
csrf = CSRFProtect()


class Referral(SubmissionMixin, db.Model):
    __tablename__ = "referrals"
    id = db.Column(db.Integer, primary_key=True)
    # The receipt's address: unguessable, unlike the id.
    public_id = db.Column(
        db.String(22), unique=True, nullable=False, default=lambda: secrets.token_urlsafe(16)
    )
    patient = db.Column(db.String(80), nullable=False)
    born = db.Column(db.Date, nullable=False)
    letter_name = db.Column(db.String(200), nullable=False)
    letter_sha256 = db.Column(db.String(64), nullable=False)
    letter = db.deferred(db.Column(db.LargeBinary, nullable=False))


class ReferralForm(FlaskForm):
    patient = StringField("Patient's full name", validators=[InputRequired(), Length(max=80)])
    born = DateField("Date of birth", validators=[InputRequired()])
    letter = FileField(
        "Referral letter",
        validators=[
            FileRequired("Attach the referral letter."),
            FileAllowed(["pdf", "png", "jpg", "jpeg"], "Attach a PDF, PNG or JPEG."),
            FileSize(LETTER_BYTES, message="Attach a letter of at most 2 MiB."),
        ],
    )

    def validate_born(self, field: DateField) -> None:
        # None when what was sent is no date: DateField says so itself
        if field.data is not None and field.data > date.today():
            raise ValidationError("Give a date of birth in the past.")


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL"),
        REDIS_URL=os.environ.get("REDIS_URL"),
        MAX_CONTENT_LENGTH=REQUEST_BYTES,
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

    @app.errorhandler(413)
    def too_large(error):
        # Past REQUEST_BYTES nothing of the request was read: the form, empty, says why
        # (for htmx the form alone, which it swaps in place).
        page = "_referral_form.html" if request.headers.get("HX-Request") else "refer.html"
        return render_template(page, form=ReferralForm(formdata=None), too_large=True), 413

    @app.get("/")
    def show_form():
        return render_template("refer.html", form=ReferralForm())

    @app.post("/referrals")
    @submit_once.form(
        ReferralForm,
        model=Referral,
        done="receipt",
        template="refer.html",
        fragment="_referral_form.html",
    )
    def refer(form, session):
        # Picked now, or kept from a form that came back: a file either way, read from
        # its start.
        letter = form.letter.data
        content = letter.read()
        return Referral(
            patient=form.patient.data,
            born=form.born.data,
            letter_name=secure_filename(letter.filename) or "letter",
            letter_sha256=hashlib.sha256(content).hexdigest(),
            letter=content,
        )

    @app.get("/referrals/<public_id>")
    def receipt(public_id: str):
        # What arrived, not the letter: its bytes are served to nobody here.
        referral = db.one_or_404(db.select(Referral).filter_by(public_id=public_id))
        return render_template("receipt.html", referral=referral)

    return app
