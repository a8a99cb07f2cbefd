"""An early-access sign-up under Turbo Drive (Hotwire) that signs up once, however often
it is sent.

Turbo sends the form with fetch() and renders the answer, so the form is a plain
POST form and the handle answers it as one: success is a 303 to the confirmation
(Turbo accepts a successful POST only as a redirect); a typo (422, same token) or
a form already used (409, fresh token) is the page again with the input kept,
which Turbo renders because it is a 4xx (it renders 4xx and 5xx HTML answers to a
form, never a 200). ``data-turbo-submits-with`` relabels the button, which Turbo
disables while a submit is in flight: comfort only; the token, spent with one
GETDEL, and the UNIQUE column make the sign-up happen once. Turbo keeps no snapshot
of a page after a POST from it, so Back fetches the form afresh (a new token, no
input); without JavaScript the form is a plain POST, and Back shows it as sent.

Run it (Turbo is in ``static/``, copied there by scripts/vendor-js)::

    export SECRET_KEY=dev DATABASE_URL=postgresql://localhost/signup \\
           REDIS_URL=redis://localhost:6379/0
    flask --app examples.turbo_signup.app run    # or, in a copy: flask --app app run
"""

import os
import secrets

from flask import Flask, Response, abort, g, render_template, url_for
from flask_wtf import FlaskForm
from flask_wtf.csrf import CSRFError, CSRFProtect
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import EmailField
from wtforms.validators import Email, InputRequired

from submit_once import FormTokens, Unavailable

# Turbo's progress bar is an inline <style>: it carries the nonce of the page Turbo
# started on (read from <meta name="csp-nonce">); nothing else inline is allowed.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; "
                           "style-src 'self' 'nonce-{nonce}'; form-action 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'")


class Base(DeclarativeBase):
    pass


class Signup(Base):
    __tablename__ = "turbo_signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The confirmation's address: unguessable, unlike the id.
    public_id: Mapped[str] = mapped_column(String(22), unique=True,
                                           default=lambda: secrets.token_urlsafe(16))
    email: Mapped[str] = mapped_column(String(254))
    # If Redis ever hands a spent token back, the second insert fails here.
    form_token_digest: Mapped[str] = mapped_column(String(43), unique=True)
    # What was sent: a resubmit of the same form with other details is told (409).
    fingerprint: Mapped[str] = mapped_column(String(43))



class SignUpForm(FlaskForm):
    email = EmailField("Email", validators=[InputRequired(), Email(check_deliverability=False)])


form_tokens = FormTokens()
csrf = CSRFProtect()
signup = form_tokens.form("signup", template="signup.html", fields=["email"],
                          fingerprint_of=lambda row: row.fingerprint)


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        DATABASE_URL=os.environ.get("DATABASE_URL"),
        SUBMIT_ONCE_REDIS_URL=os.environ.get("REDIS_URL"),
    )
    app.config.update(config or {})
    engine = create_engine(app.config["DATABASE_URL"])
    Base.metadata.create_all(engine)
    # expire_on_commit=False: the row a submit returns is read after its commit.
    sessions = app.extensions["signup_db"] = sessionmaker(engine, expire_on_commit=False)
    form_tokens.init_app(app)
    csrf.init_app(app)

    app.jinja_env.globals["csp_nonce"] = csp_nonce

    @app.after_request
    def content_security_policy(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy",
                                    CONTENT_SECURITY_POLICY.format(nonce=csp_nonce()))
        return response

    @app.get("/")
    def show_form():
        return signup.render(form=SignUpForm())

    # Not "/": a POST to a URL drops the browser's cached copy of it, so Back after
    # posting to the form's own URL would fetch the form afresh.
    @app.post("/signup")
    def sign_up():
        form = SignUpForm()
        if form.validate_on_submit():
            return signup.submit(
                sessions=sessions, form=form,
                done=lambda row: url_for("thanks", public_id=row.public_id),
                create=lambda db, digest: sign_up_once(db, form.email.data, digest),
                find=lambda db, digest: db.scalar(
                    select(Signup).where(Signup.form_token_digest == digest)),
            )
        return signup.render(form=form)   # a typo: 422 (Turbo renders it), the same token

    @app.errorhandler(Unavailable)        # Redis away: no token for a new form
    def unavailable(error: Unavailable):
        return "We could not reach our systems just now: please try again in a moment.", 503

    @app.errorhandler(CSRFError)          # the session expired: input kept, 400
    def session_lost(error: CSRFError):
        return signup.recover(form=SignUpForm())

    @app.get("/thanks/<public_id>")
    def thanks(public_id: str):
        with sessions() as db:
            row = db.scalar(select(Signup).where(Signup.public_id == public_id))
        return render_template("thanks.html", signup=row or abort(404))

    return app


def csp_nonce() -> str:
    """This response's Content-Security-Policy nonce."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def sign_up_once(db: Session, email: str, digest: str) -> Signup:
    row = Signup(email=email, form_token_digest=digest, fingerprint=signup.fingerprint())
    db.add(row)
    db.flush()
    return row
