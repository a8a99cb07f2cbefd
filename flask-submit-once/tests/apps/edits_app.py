"""An edit of an existing row, as the library's users write one: a patient's address,
changed through a protected form. The patient is a ``VersionedMixin`` row (its page carries
the version it shows); each change that lands is an ``AddressChange`` row, keyed by the
form token's digest, so a repeat of the change finds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask, render_template, request, url_for
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFProtect
from jinja2 import DictLoader
from sqlalchemy import ForeignKey, String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import StringField
from wtforms.validators import InputRequired, Length

from flask_submit_once import SubmissionMixin, SubmitOnce, VersionedMixin

submit_once = SubmitOnce()
csrf = CSRFProtect()
#: What a test runs between the view's read of the patient and its write (another edit
#: committing there, say); None: nothing.
between_read_and_write: Callable[[], None] | None = None


class Base(DeclarativeBase):
    pass


class Patient(VersionedMixin, Base):
    __tablename__ = "patients"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(80))
    address: Mapped[str] = mapped_column(String(200))


class AddressChange(SubmissionMixin, Base):
    __tablename__ = "address_changes"
    id: Mapped[int] = mapped_column(primary_key=True)
    patient_id: Mapped[int] = mapped_column(ForeignKey(Patient.id))
    address: Mapped[str] = mapped_column(String(200))


class AddressForm(FlaskForm):
    address = StringField("Address", validators=[InputRequired(), Length(max=200)])


PAGE = """<!doctype html><html><title>Address</title>
<p id="now">{{ patient.name }} lives at {{ patient.address }}.</p>
<form method="post" action="{{ url_for('change_address', id=patient.id) }}">
  {% if submit_once.message %}<p role="alert">{{ submit_once.message }}</p>{% endif %}
  <input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
  {{ submit_once.input("change_address", id=patient.id) }}
  {{ submit_once.version_input(patient) }}
  <input name="address" value="{{ form.address.data or '' }}">
</form></html>"""


def the_patient(db: Session) -> dict[str, Any]:
    """The patient as they are now: the page's other version beside the form's."""
    return {"patient": db.get(Patient, (request.view_args or {})["id"])}


def create_app(sessions: sessionmaker[Session], **config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"SECRET_KEY": "edits", "TESTING": True, **config})
    app.jinja_loader = DictLoader({"address.html": PAGE})
    submit_once.init_app(app, sessions=sessions)
    csrf.init_app(app)

    @app.get("/patients/<int:id>")
    def patient(id: int) -> str:
        now = the_patient(submit_once.session)
        return render_template("address.html", form=AddressForm(obj=now["patient"]), **now)

    @app.post("/patients/<int:id>/address")
    @submit_once.form(
        AddressForm,
        model=AddressChange,
        template="address.html",
        done=lambda change: url_for("patient", id=change.patient_id),
        context=lambda: the_patient(submit_once.session),
    )
    def change_address(form: AddressForm, db: Session, id: int) -> AddressChange:
        # Not Session.get_one: SQLAlchemy 2.0.22 brought it, the oldest supported is 2.0.0.
        patient = db.scalars(select(Patient).filter_by(id=id)).one()
        if between_read_and_write is not None:
            between_read_and_write()
        patient.address = form.address.data
        return AddressChange(patient_id=id, address=form.address.data)

    @app.put("/api/patients/<int:id>/address")
    @csrf.exempt
    @submit_once.idempotent(
        key=lambda: request.headers["Idempotency-Key"],
        model=AddressChange,
        respond=lambda change: ({"address": change.address}, 201),
    )
    def put_address(db: Session, id: int) -> AddressChange:
        patient = db.scalars(select(Patient).filter_by(id=id)).one()
        if between_read_and_write is not None:
            between_read_and_write()
        patient.address = request.get_json()["address"]
        return AddressChange(patient_id=id, address=patient.address)

    return app
