"""What a file upload costs the token layer, for ``scripts/bench --costs``.

A small app on the library alone (its public API): a referral letter, a note and a file,
sent to a protected view and to an unprotected one that does the same work (validates
the form, reads the whole file, INSERTs a row with its size). The token layer's cost is
protected − unprotected for one request body; an upload's extra is that cost with a file
less that cost without one, set beside one ``hashlib.sha256`` pass over the same bytes,
timed in the same blocks. Bodies are encoded before the clock starts, as a browser
sends them, so the test client's encoding is not timed.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Callable

from flask import Flask, render_template_string
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from wtforms import StringField
from wtforms.validators import InputRequired

from flask_submit_once import SubmissionMixin, SubmitOnce

from .servers import redis_calls

submit_once = SubmitOnce()
SIZES = {"1 MiB": 2**20, "10 MiB": 10 * 2**20}


class Base(DeclarativeBase):
    pass


class Letter(SubmissionMixin, Base):
    __tablename__ = "bench_letters"
    id: Mapped[int] = mapped_column(primary_key=True)
    note: Mapped[str] = mapped_column(String(200))
    size: Mapped[int]


class LetterForm(FlaskForm):
    note = StringField(validators=[InputRequired()])
    letter = FileField()


def create_app(database_url: str, redis_url: str) -> tuple[Flask, Callable[[], None]]:
    """The letters app; and what closes its pools."""
    engine = create_engine(database_url)
    Base.metadata.create_all(engine)
    sessions = sessionmaker(engine)
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="bench",
        REDIS_URL=redis_url,
        WTF_CSRF_ENABLED=False,
        MAX_CONTENT_LENGTH=16 * 2**20,
        # One address opens every form of the run.
        SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=0,
        SUBMIT_ONCE_MAX_FORMS_PER_SESSION=0,
    )
    submit_once.init_app(app, sessions=sessions)

    def letter(form: LetterForm) -> Letter:
        upload = form.letter.data
        size = len(upload.read()) if upload else 0
        return Letter(note=form.note.data, size=size)

    @app.get("/letters")
    def page() -> str:
        return render_template_string('{{ submit_once.input("send") }}')

    @app.post("/letters")
    @submit_once.form(LetterForm, model=Letter, done=lambda row: f"/letters/{row.id}")
    def send(form: LetterForm, db: Session) -> Letter:
        return letter(form)

    @app.post("/unprotected/letters")
    def send_unprotected() -> tuple[str, int]:
        form = LetterForm()
        assert form.validate()
        with sessions() as db, db.begin():
            # The UNIQUE column gets a value of its own, as the benchmark's baseline does.
            row = letter(form)
            row.submission_digest = secrets.token_urlsafe(32)
            db.add(row)
        return "", 303

    def close() -> None:
        with app.app_context():
            submit_once.redis.close()
        engine.dispose()

    return app, close


def body(token: str, data: bytes | None) -> tuple[bytes, str]:
    """A multipart body (the note, the token, the file if any), as a browser encodes it."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in (("note", "Referral"), ("form_token", token))
    ]
    if data is not None:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="letter"; '
            'filename="letter.pdf"\r\nContent-Type: application/pdf\r\n\r\n'.encode()
            + data
            + b"\r\n"
        )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), (
        f"multipart/form-data; boundary={boundary}"
    )


def rows(
    database_url: str, redis_url: str, n: int, ab: Callable[..., list[float]]
) -> list[tuple[str, str, str, str]]:
    """The costs' rows for uploads: ``ab(*blocks, n=)`` times blocks in turns."""
    app, close = create_app(database_url, redis_url)
    client = app.test_client()

    def submits(path: str, data: bytes | None) -> Callable[[int], float]:
        def block(count: int) -> float:
            sent = []
            for _ in range(count):
                token = ""
                if path == "/letters":
                    found = client.get("/letters").get_data(as_text=True)
                    token = found.split('value="')[1].split('"')[0]
                sent.append(body(token, data))
            started = time.process_time()
            for raw, content_type in sent:
                answer = client.post(path, data=raw, content_type=content_type)
                assert answer.status_code == 303, answer.status_code
            return (time.process_time() - started) / count * 1e6

        return block

    def hashed(data: bytes) -> Callable[[int], float]:
        def block(count: int) -> float:
            started = time.process_time()
            for _ in range(count):
                hashlib.sha256(data).hexdigest()
            return (time.process_time() - started) / count * 1e6

        return block

    found: list[tuple[str, str, str, str]] = []
    try:
        ours, theirs = ab(submits("/letters", None), submits("/unprotected/letters", None), n=n)
        without = ours - theirs
        found.append(
            (
                "a form without a file: protected − unprotected submit, CPU µs",
                f"{without:.0f}",
                "the unprotected submit",
                f"{theirs:.0f}",
            )
        )
        for label, size in SIZES.items():
            data = secrets.token_bytes(size)
            count = max(n // (size // 2**20) // 4, 12)
            ours, theirs, sha = ab(
                submits("/letters", data),
                submits("/unprotected/letters", data),
                hashed(data),
                n=count,
            )
            extra = ours - theirs - without
            found.append(
                (
                    f"a {label} upload: its extra (protected − unprotected, less a form "
                    f"without a file), CPU µs; ratio to one SHA-256 pass",
                    f"{extra:.0f} ({extra / sha:.2f}×)",
                    f"`hashlib.sha256` over the same {label}",
                    f"{sha:.0f}",
                )
            )
        # What an upload adds in Redis: nothing, when the submit takes effect.
        with app.app_context():
            server = submit_once.redis
        commands = []
        for data in (None, secrets.token_bytes(2**20)):
            token = client.get("/letters").get_data(as_text=True).split('value="')[1].split('"')[0]
            raw, content_type = body(token, data)
            before = sum(redis_calls(server).values())
            assert client.post("/letters", data=raw, content_type=content_type).status_code == 303
            commands.append(sum(redis_calls(server).values()) - before)
        found.append(
            (
                "Redis commands a submit sends, without a file",
                str(commands[0]),
                "with a 1 MiB file",
                str(commands[1]),
            )
        )
    finally:
        close()
    return found
