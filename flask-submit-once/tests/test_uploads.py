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


# Kept on a form shown again

KEPT_FIELD = "form_token_kept"


def kept_keys(rdb) -> list[str]:
    return sorted(rdb.scan_iter("so:upload:*"))


def test_an_upload_sent_with_an_invalid_field_is_kept_and_sent_with_the_correction(
    once_forms, letters, rdb
):
    """The note was missing: the form comes back with the note's error and the letter
    kept (its name shown), so sending the note alone sends the letter too; once it has
    taken effect the kept copy is gone."""
    page = once_forms.open("/letters")
    invalid = page.submit({"note": "", "letter": letter()})
    assert invalid.status_code == 422
    assert "Kept: letter.pdf" in invalid.text and f'name="{KEPT_FIELD}"' in invalid.text
    (key,) = kept_keys(rdb)
    assert 0 < rdb.ttl(key) <= 3600
    corrected = once_forms.page("/letters", invalid.text)
    answer = corrected.submit({"note": NOTE})
    assert (answer.status_code, answer.headers["Location"]) == (303, "/letters/1")
    assert letters() == [("letter.pdf", LETTER)]
    assert kept_keys(rdb) == []


def test_an_upload_invalid_twice_stays_kept_once_and_a_file_picked_again_replaces_it(
    once_forms, letters, rdb
):
    page = once_forms.open("/letters")
    first = page.submit({"note": "", "letter": letter()})
    again = once_forms.page("/letters", first.text).submit({"note": ""})
    assert again.status_code == 422 and "Kept: letter.pdf" in again.text
    assert len(kept_keys(rdb)) == 1
    corrected = b"%PDF-1.4\nthe corrected letter\n"
    last = once_forms.page("/letters", again.text)
    assert last.submit({"note": NOTE, "letter": letter(corrected, "v2.pdf")}).status_code == 303
    assert letters() == [("v2.pdf", corrected)]


def test_a_kept_uploads_reference_puts_nothing_back_in_another_session_or_when_forged(
    once_forms, letters, make_app
):
    """The reference is bound to the browser session and the form: copied into another
    session's form (or altered) it is nothing, and the file is asked for again."""
    from flask_submit_once.testing import OnceForms

    invalid = once_forms.open("/letters").submit({"note": "", "letter": letter()})
    reference = once_forms.page("/letters", invalid.text).hidden[KEPT_FIELD]
    stranger = OnceForms(make_app().test_client())
    theirs = stranger.open("/letters")
    for sent in (reference, reference[:-2] + "xx"):
        answer = theirs.submit({"note": NOTE, KEPT_FIELD: sent})
        assert answer.status_code == 422 and "Kept:" not in answer.text
    forged = once_forms.page("/letters", invalid.text)
    answer = forged.submit({"note": NOTE, KEPT_FIELD: reference[:-2] + "xx"})
    assert answer.status_code == 422
    assert letters() == []


def test_kept_uploads_are_bounded_per_session_and_by_size(make_app, rdb, letters):
    from flask_submit_once.testing import OnceForms

    forms = OnceForms(
        make_app(
            SUBMIT_ONCE_MAX_KEPT_UPLOADS_PER_SESSION=3, SUBMIT_ONCE_MAX_KEPT_UPLOAD_BYTES=1024
        ).test_client()
    )
    for _ in range(5):
        assert forms.open("/letters").submit({"note": "", "letter": letter()}).status_code == 422
    assert len(kept_keys(rdb)) == 3
    large = forms.open("/letters").submit({"note": "", "letter": letter(SCAN[:2048])})
    assert large.status_code == 422 and "Kept:" not in large.text
    assert len(kept_keys(rdb)) == 3


def test_a_kept_upload_gone_before_its_submit_took_effect_is_asked_for_again(
    once_forms, letters, rdb
):
    """Its bytes expired (or were evicted) while the page was open: the submit that would
    take effect is not made with an empty file; the form says to pick it again (422),
    its token still good for that."""
    invalid = once_forms.open("/letters").submit({"note": "", "letter": letter()})
    rdb.delete(*kept_keys(rdb))
    corrected = once_forms.page("/letters", invalid.text)
    answer = corrected.submit({"note": NOTE})
    assert answer.status_code == 422
    assert "no longer kept here: pick it again" in answer.text
    assert letters() == []
    again = once_forms.page("/letters", answer.text).submit({"note": NOTE, "letter": letter()})
    assert (again.status_code, again.headers["Location"]) == (303, "/letters/1")
    assert letters() == [("letter.pdf", LETTER)]


def test_a_storm_of_the_corrected_submit_with_a_kept_upload_stores_one_letter(
    once_forms, letters, rdb
):
    invalid = once_forms.open("/letters").submit({"note": "", "letter": letter(SCAN)})
    corrected = once_forms.page("/letters", invalid.text)
    answers = corrected.submit_concurrently({"note": NOTE} for _ in range(20))
    assert {answer.status_code for answer in answers} == {303}
    assert once_forms.assert_once(answers, rows=lambda: len(letters())) == "/letters/1"
    assert letters() == [("letter.pdf", SCAN)]
    assert kept_keys(rdb) == []


@pytest.mark.parametrize("worker", ["same-worker", "other-worker"])
def test_the_corrected_submit_sent_again_after_its_kept_copy_went_lands_on_the_letter(
    once_forms, letters, rdb, other_worker, worker
):
    """The kept copy is deleted once the corrected submit takes effect; its repeat (a
    double click, Back and send) still refers to it, and the reference says what the file
    was: the same input, taken to the letter, not told it differs. Another note is."""
    invalid = once_forms.open("/letters").submit({"note": "", "letter": letter()})
    corrected = once_forms.page("/letters", invalid.text)
    assert corrected.submit({"note": NOTE}).status_code == 303
    assert kept_keys(rdb) == []
    client = other_worker() if worker == "other-worker" else None
    again = corrected.submit({"note": NOTE}, client=client)
    assert (again.status_code, again.headers.get("Location")) == (303, "/letters/1")
    edited = corrected.submit({"note": "Referral from Dr Ada"}, client=client)
    assert edited.status_code == 409 and "already used, with other details" in edited.text
    assert letters() == [("letter.pdf", LETTER)]
