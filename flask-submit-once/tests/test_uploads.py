"""A form with a file input: the file's contents are part of what was sent, so a
corrected upload sent with a used token is told it differs, on the worker that saw the
first submit and on any other, and the same file again lands on the first result."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import select

from signup_app import Letter

LETTER = b"%PDF-1.4\nReferral for Ada Lovelace: knee, left.\n"
# A scan large enough to be read in several chunks; its correction differs in the last byte.
SCAN = bytes(range(256)) * 1024
NOTE = "Referral from Dr Byron"


def letter(content: bytes = LETTER, name: str = "letter.pdf") -> tuple[io.BytesIO, str, str]:
    """A file input's value, as the test client sends it."""
    return io.BytesIO(content), name, "application/pdf"


@pytest.fixture
def letters(sessions):
    """``letters()``: (file name, contents) of every letter stored, in order."""

    def rows() -> list[tuple[str, bytes]]:
        with sessions() as db:
            return [tuple(row) for row in db.execute(select(Letter.filename, Letter.content))]

    return rows


@pytest.fixture
def other_worker(make_app, once_forms):
    """``other_worker()``: a client of another app on the same Redis and database (another
    gunicorn worker, which has not seen this process's submits), in the browser session
    ``once_forms`` has now."""

    def client():
        other = make_app().test_client()
        other.set_cookie("session", once_forms.client.get_cookie("session").value)
        return other

    return client


def test_the_same_file_sent_again_lands_on_the_first_letter(once_forms, letters):
    page = once_forms.open("/letters")
    answers = [page.submit({"note": NOTE, "letter": letter()}) for _ in range(2)]
    assert [answer.status_code for answer in answers] == [303, 303]
    assert once_forms.assert_once(answers, rows=lambda: len(letters())) == "/letters/1"
    # The view read the whole file, after the library had read it for the fingerprint.
    assert letters() == [("letter.pdf", LETTER)]


def test_the_same_file_sent_again_through_another_worker_lands_on_it(
    once_forms, letters, other_worker
):
    page = once_forms.open("/letters")
    assert page.submit({"note": NOTE, "letter": letter()}).status_code == 303
    again = page.submit({"note": NOTE, "letter": letter()}, client=other_worker())
    assert (again.status_code, again.headers["Location"]) == (303, "/letters/1")
    assert letters() == [("letter.pdf", LETTER)]


#: (the first file, the corrected one, its name)
CORRECTIONS = {
    "same-name-other-bytes": (
        LETTER,
        b"%PDF-1.4\nReferral for Ada Lovelace: knee, right.\n",
        "letter.pdf",
    ),
    "other-name": (LETTER, LETTER, "letter-v2.pdf"),
    "a-large-file-whose-last-byte-differs": (SCAN, SCAN[:-1] + b"\x00", "letter.pdf"),
}


@pytest.mark.parametrize("worker", ["same-worker", "other-worker"])
@pytest.mark.parametrize("first, corrected, name", CORRECTIONS.values(), ids=CORRECTIONS.keys())
def test_a_corrected_upload_with_a_used_token_is_told_it_differs_not_dropped(
    once_forms, letters, other_worker, worker, first, corrected, name
):
    """Back, pick the corrected file, send: the first letter is not what the user sent
    now, so they are told (409, the note kept), never taken to it as if it had arrived."""
    page = once_forms.open("/letters")
    assert page.submit({"note": NOTE, "letter": letter(first)}).status_code == 303
    client = other_worker() if worker == "other-worker" else None
    again = page.submit({"note": NOTE, "letter": letter(corrected, name)}, client=client)
    assert again.status_code == 409, again.headers.get("Location")
    assert "already used, with other details" in again.text and f'value="{NOTE}"' in again.text
    assert letters() == [("letter.pdf", first)]
    # The form it came back with sends the correction as a letter of its own.
    retry = once_forms.page("/letters", again.text)
    assert retry.submit({"note": NOTE, "letter": letter(corrected, name)}).status_code == 303
    assert letters() == [("letter.pdf", first), (name, corrected)]


def test_a_storm_of_the_same_upload_stores_one_letter_and_every_answer_lands_on_it(
    once_forms, letters
):
    page = once_forms.open("/letters")
    # A file is a stream: each of the 20 requests sends its own copy of the same bytes.
    answers = page.submit_concurrently({"note": NOTE, "letter": letter(SCAN)} for _ in range(20))
    assert {answer.status_code for answer in answers} == {303}
    assert once_forms.assert_once(answers, rows=lambda: len(letters())) == "/letters/1"
    assert letters() == [("letter.pdf", SCAN)]


def test_an_upload_over_the_apps_size_limit_is_refused_before_its_token_is_spent(make_app, letters):
    """MAX_CONTENT_LENGTH bounds what is read, and hashed: Werkzeug refuses more (413)
    before the token is read, so the same form then sends a smaller file."""
    from flask_submit_once.testing import OnceForms

    forms = OnceForms(make_app(MAX_CONTENT_LENGTH=4096).test_client())
    page = forms.open("/letters")
    assert page.submit({"note": NOTE, "letter": letter(SCAN[:8192])}).status_code == 413
    assert page.submit({"note": NOTE, "letter": letter()}).status_code == 303
    assert letters() == [("letter.pdf", LETTER)]


def test_an_idempotent_views_key_sent_again_with_another_file_is_another_request(app):
    """The default fingerprint of ``idempotent()`` reads a multipart request's files too."""
    from flask_submit_once._idempotent import request_fingerprint

    def sent(content: bytes) -> str:
        data = {"note": NOTE, "letter": letter(content)}
        with app.test_request_context("/api/letters", method="POST", data=data):
            return request_fingerprint()

    assert sent(LETTER) == sent(LETTER) != sent(LETTER + b"\n")
