"""The booking in two steps of ``booking_in_steps`` under Turbo Drive (Hotwire), booked
once however often it is sent.

Turbo Drive takes a successful answer to a form only as a redirect, and a step answers
with the next step's page: the steps live in a ``<turbo-frame>``, which takes a step's
page (200) or its typo (422) and swaps its own frame out of it. The form that books
targets the whole page (``data-turbo-frame="_top"``): its 303 takes Turbo to the booking,
and its 409 or 422 is the page again with the input. The model and the forms are those
of ``booking_in_steps``, the views the same; only the templates differ. Turbo 8.0.23 is
in ``static/``. Run it from the examples folder::

    export SECRET_KEY=dev DATABASE_URL=postgresql+psycopg://localhost/booking \\
           REDIS_URL=redis://localhost:6379/0
    flask --app turbo_booking_in_steps.app run
"""

import os
import secrets

from booking_in_steps.app import Appointment, AppointmentForm, DetailsForm, csrf, db, submit_once
from flask import Flask, Response, g, render_template

# Turbo's progress bar is an inline <style>: it carries the nonce of the page Turbo
# started on (read from <meta name="csp-nonce">); nothing else inline is allowed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; "
    "style-src 'self' 'nonce-{nonce}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL"),
        REDIS_URL=os.environ.get("REDIS_URL"),
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
    def details():
        return render_template("details.html", form=DetailsForm())

    @app.post("/day")
    def choose_day():
        submit_once.carry_token("book")
        form = DetailsForm()
        if not form.validate():
            return render_template("details.html", form=form), 422
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


def csp_nonce() -> str:
    """This response's Content-Security-Policy nonce."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce
