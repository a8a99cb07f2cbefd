"""The library's docs are true.

Sphinx builds them with warnings as errors and documents every public name; every
``flask_submit_once`` name, setting and template attribute a page mentions exists; the
pages name nothing outside this folder; and the code they show runs against the suite's
real Redis and PostgreSQL: the README's quick start (as a plain POST, Turbo, htmx and
fetch send it), each guide's files on top of it, the testing guide's suite under pytest,
and the examples the guides include.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import importlib
import os
import re
import runpy
import subprocess
import sys
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from flask import Flask
from sqlalchemy import Engine, create_engine, text
from werkzeug.test import TestResponse

import flask_submit_once
from card_provider import CardProvider
from flask_submit_once import SubmitOnce, signals, testing
from flask_submit_once._extension import RENAMED
from flask_submit_once.testing import FormPage, OnceForms, landed_on
from live import serve

LIBRARY = Path(__file__).resolve().parents[1]
DOCS, EXAMPLES = LIBRARY / "docs", LIBRARY / "examples"
README, CHANGELOG = LIBRARY / "README.md", LIBRARY / "CHANGELOG.md"
PAGES = [README, EXAMPLES / "README.md", *sorted(DOCS.glob("*.md")), DOCS / "api.rst"]
by_page = pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
ADA, GRACE = "ada@example.com", "grace@example.com"
#: What Turbo Drive sends as Accept with a form.
TURBO_ACCEPT = "text/vnd.turbo-stream.html, text/html, application/xhtml+xml"
HTMX = {"HX-Request": "true"}


# --- The code the pages show --------------------------------------------------------------

FENCE = re.compile(r"^ *```([\w+-]+)\n(.*?)^ *```$", re.S | re.M)
#: A block that is a file names it on its first line: ``# app.py``, ``{# templates/x.html #}``.
FILE_NAME = re.compile(r"\A(?:# (\S+\.py)|\{# (\S+) #\})\n")
#: Every Python file a page shows, and the page: each is run by a test below.
RUN = {
    "app.py": README,
    "seats.py": DOCS / "plain.md",
    "addresses.py": DOCS / "plain.md",
    "api.py": DOCS / "fetch.md",
    "conftest.py": DOCS / "testing.md",
    "test_signup.py": DOCS / "testing.md",
    "test_referrals.py": DOCS / "uploads.md",
    "token_store.py": DOCS / "pattern.md",
    "charge.py": DOCS / "pattern.md",
}


def files_of(page: Path) -> dict[str, str]:
    """The files a page's code blocks are, by name."""
    files = {}
    for _, body in FENCE.findall(page.read_text()):
        named = FILE_NAME.match(body)
        if named:
            files[named.group(1) or named.group(2)] = body
    return files


def test_every_python_block_is_a_file_that_a_test_here_runs() -> None:
    shown: dict[str, Path] = {}
    for page in [*PAGES, CHANGELOG]:
        for language, body in FENCE.findall(page.read_text()):
            if language == "python":
                named = FILE_NAME.match(body)
                assert named, f"{page.name}: a Python block that names no file:\n{body}"
                shown[named.group(1)] = page
    assert shown == RUN


@dataclass
class QuickStart:
    """The README's quick start, written out as a user would, imported as ``app``."""

    folder: Path
    module: ModuleType

    @property
    def app(self) -> Flask:
        return self.module.app  # type: ignore[no-any-return]

    def forms(self) -> OnceForms:
        return OnceForms(self.app.test_client())

    def add(self, page: Path, name: str) -> ModuleType:
        """A guide's files beside the quick start, and its module ``name`` imported."""
        write(self.folder, files_of(page))
        return importlib.import_module(name)

    def count(self, model: Any = None) -> Callable[[], int]:
        """``rows()``: how many rows of ``model`` (default: the quick start's ``Signup``)."""
        db, model = self.module.db, model or self.module.Signup

        def rows() -> int:
            with self.app.app_context():
                return int(db.session.scalar(db.select(db.func.count()).select_from(model)))

        return rows


def write(folder: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body)


def quick_start_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, database_url: str) -> None:
    """What the quick start reads (``app.config.from_prefixed_env()``), with Back showing
    the form as it was turned on, as the text after it says."""
    monkeypatch.setenv("FLASK_SECRET_KEY", "docs")
    monkeypatch.setenv("FLASK_SQLALCHEMY_DATABASE_URI", database_url)
    monkeypatch.setenv("FLASK_REDIS_URL", redis_url)
    monkeypatch.setenv("FLASK_SUBMIT_ONCE_BACK_SHOWS_FORM", "true")


@pytest.fixture
def quick_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, database_url: str
) -> Iterator[QuickStart]:
    write(tmp_path, files_of(README))
    quick_start_env(monkeypatch, redis_url, database_url)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in RUN:
        sys.modules.pop(name.removesuffix(".py"), None)
    module = importlib.import_module("app")
    yield QuickStart(tmp_path, module)
    for name in RUN:
        sys.modules.pop(name.removesuffix(".py"), None)
    with module.app.app_context():
        module.db.session.remove()
        module.db.drop_all()
        module.db.engine.dispose()
        module.submit_once.redis.close()


def test_the_quick_start_makes_one_signup_of_a_double_click(quick_start: QuickStart) -> None:
    forms = quick_start.forms()
    shown = forms.client.get("/signup")
    page = forms.page("/signup", shown.text)
    # Back shows the form as it was, spent token and all: cached, and posted elsewhere.
    assert shown.headers["Cache-Control"] == "private, no-cache"
    assert "Cookie" not in shown.headers.get("Vary", "") and page.url.endswith("/signup/send")
    answers = page.submit_twice({"email": ADA})
    assert [answer.status_code for answer in answers] == [303, 303]
    where = forms.assert_once(answers, rows=quick_start.count())
    assert f"{ADA} is signed up" in forms.client.get(where).text


def fetch_headers(page: FormPage) -> dict[str, str]:
    """The headers the fetch guide's script sends, with the values it reads from the form."""
    (script,) = (
        body
        for language, body in FENCE.findall((DOCS / "fetch.md").read_text())
        if language == "js"
    )
    sent = dict(re.findall(r'"(X-[\w-]+)": field\("(\w+)"\)\.value', script))
    assert set(sent) == {"X-CSRFToken", "X-Submit-Once-Token"}, sent
    values = {**page.hidden, "form_token": page.token}
    return {header: str(values[field]) for header, field in sent.items()}


def test_the_quick_start_answers_turbo_htmx_and_fetch_from_the_same_code(
    quick_start: QuickStart,
) -> None:
    forms = quick_start.forms()
    turbo = forms.open("/signup").submit_twice({"email": ADA}, headers={"Accept": TURBO_ACCEPT})
    htmx = forms.open("/signup").submit_twice({"email": GRACE}, headers=HTMX)
    page = forms.open("/signup")
    fetched = [
        forms.client.post(page.url, json={"email": "lin@example.com"}, headers=fetch_headers(page))
        for _ in range(2)
    ]
    assert [a.status_code for a in turbo] == [303, 303]
    assert [a.status_code for a in htmx] == [200, 200] and "HX-Redirect" in htmx[0].headers
    assert [a.status_code for a in fetched] == [201, 200]
    assert [a.json["status"] for a in fetched] == ["created", "duplicate"]  # type: ignore[index]
    places = [forms.assert_once(answers, rows=lambda: 1) for answers in (turbo, htmx, fetched)]
    assert len(set(places)) == 3 and quick_start.count()() == 3


def test_the_quick_start_keeps_what_the_user_typed_and_says_why(quick_start: QuickStart) -> None:
    forms = quick_start.forms()
    page = forms.open("/signup")
    typo = page.submit({"email": "ada@"})
    assert typo.status_code == 422 and forms.page("/signup", typo.text).token == page.token
    page.submit({"email": ADA})
    # Back, edit, submit
    edited = page.submit({"email": GRACE})
    assert edited.status_code == 409 and f'value="{GRACE}"' in edited.text
    assert forms.page("/signup", edited.text).token not in (None, page.token)
    script = page.submit({"email": GRACE}, json=True)
    assert script.status_code == 409 and script.json["reason"] == "changed"  # type: ignore[index]
    assert script.json["existing"] == landed_on(page.submit({"email": ADA}))  # type: ignore[index]
    lost = forms.open("/signup")
    lost_answer = lost.submit({"email": GRACE, "csrf_token": "expired"})
    assert lost_answer.status_code == 400 and f'value="{GRACE}"' in lost_answer.text
    assert forms.page("/signup", lost_answer.text).token != lost.token
    assert quick_start.count()() == 1


def test_the_plain_guides_seats_book_once_refuse_and_say_so(quick_start: QuickStart) -> None:
    seats = quick_start.add(DOCS / "plain.md", "seats")
    with quick_start.app.app_context():
        seats.db.session.add_all([seats.Event(id=1, seats_left=5), seats.Event(id=2, seats_left=5)])
        seats.db.session.commit()
    forms, bookings = quick_start.forms(), quick_start.count(seats.Booking)
    page = forms.open("/events/1")
    where = forms.assert_once(page.submit_twice({"seats": "3"}), rows=bookings)
    # flashed once, for the first
    assert "Booked: 3 seats." in forms.client.get(where).text
    assert "Booked: " not in forms.client.get(where).text
    refused = forms.open("/events/1").submit({"seats": "3"})
    assert refused.status_code == 409 and "Not that many seats" in refused.text
    assert "2 seats left" in refused.text and 'value="3"' in refused.text
    elsewhere = forms.open("/events/1").submit({"seats": "1"}, to="/events/2/book")
    # each event's form is its own
    assert elsewhere.status_code == 409 and bookings() == 1


def test_the_plain_guides_address_edit_lands_once_and_a_stale_tab_is_told(
    quick_start: QuickStart,
) -> None:
    addresses = quick_start.add(DOCS / "plain.md", "addresses")
    with quick_start.app.app_context():
        addresses.db.session.add(addresses.Patient(id=1, address="1 Old Road"))
        addresses.db.session.commit()
    forms, changes = quick_start.forms(), quick_start.count(addresses.AddressChange)
    first, second = forms.open("/patients/1"), forms.open("/patients/1")
    where = forms.assert_once(first.submit_twice({"address": "2 New Street"}), rows=changes)
    assert where == "/patients/1"
    stale = second.submit({"address": "3 Other Lane"})
    assert stale.status_code == 409 and "changed since you opened it" in stale.text
    assert "Address on file: 2 New Street" in stale.text and 'value="3 Other Lane"' in stale.text
    assert (
        forms.page("/patients/1", stale.text).submit({"address": "3 Other Lane"}).status_code == 303
    )
    with quick_start.app.app_context():
        patient = addresses.db.session.get(addresses.Patient, 1)
        assert (patient.address, patient.version, changes()) == ("3 Other Lane", 3, 2)


def test_the_fetch_guides_api_takes_each_key_once(quick_start: QuickStart) -> None:
    quick_start.add(DOCS / "fetch.md", "api")
    client = quick_start.app.test_client()

    def send(key: str | None, body: object) -> TestResponse:
        return client.post(
            "/api/signups", json=body, headers={"Idempotency-Key": key} if key else {}
        )

    first, again = send("key-000001", {"email": ADA}), send("key-000001", {"email": ADA})
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert first.headers["Location"] == again.headers["Location"]
    # another request
    assert send("key-000001", {"email": GRACE}).status_code == 422
    assert send(None, {"email": GRACE}).status_code == 400
    # the key is given back
    assert send("key-000002", {"mail": GRACE}).status_code == 422
    assert send("key-000002", {"email": GRACE}).status_code == 201
    assert quick_start.count()() == 2


@pytest.mark.parametrize("store", ["postgresql", pytest.param("sqlite", marks=pytest.mark.sqlite)])
def test_the_testing_guides_suite_passes_against_the_quick_start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    database_url: str,
    database: Engine,
    store: str,
) -> None:
    """On SQLite too: a user's own suite needs no PostgreSQL (a file of its own, with
    SQLite's defaults, as a user's first conftest would have it)."""
    write(tmp_path, {**files_of(README), **files_of(DOCS / "testing.md")})
    if store == "sqlite":
        database_url = f"sqlite:///{tmp_path / 'quick-start.db'}"
    quick_start_env(monkeypatch, redis_url, database_url)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "error",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and re.search(r"\b5 passed", run.stdout), run.stdout + run.stderr
    drop_tables(database, "signup")


@pytest.fixture
def database(database_url: str) -> Iterator[Engine]:
    """An engine on the suite's database, to count and drop what a page's code made."""
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


def drop_tables(engine: Engine, *tables: str) -> None:
    with engine.begin() as conn:
        for table in tables:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))


def rows(engine: Engine, table: str) -> Callable[[], int]:
    def count() -> int:
        with engine.connect() as conn:
            return int(conn.scalar(text(f"SELECT count(*) FROM {table}")))

    return count


def test_the_pattern_pages_token_store_runs(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, files_of(DOCS / "pattern.md"))
    monkeypatch.setenv("REDIS_URL", redis_url)
    # its asserts are the test
    ran = runpy.run_path(str(tmp_path / "token_store.py"))
    assert ran["store"].ttl == 3600


def test_the_pattern_pages_charge_is_made_once_declined_and_finished_by_the_sweeper(
    quick_start: QuickStart,
) -> None:
    provider = CardProvider()
    with serve(provider.app) as port:
        quick_start.app.config["PROVIDER_URL"] = f"http://127.0.0.1:{port}"
        shop = quick_start.add(DOCS / "pattern.md", "charge")
        forms, orders = quick_start.forms(), quick_start.count(shop.Order)
        page = forms.open("/checkout")
        where = forms.assert_once(page.submit_twice({"cents": "1200", "card": "pm_1"}), rows=orders)
        assert "paid (ch_1)" in forms.client.get(where).text
        declined = forms.open("/checkout").submit({"cents": "1200", "card": "declined"})
        assert declined.status_code == 409 and "Your card was declined" in declined.text
        assert 'value="declined"' in declined.text
        # it charges, and its answer is lost
        provider.fail_after_charge = 1
        lost = forms.open("/checkout")
        unconfirmed = lost.submit({"cents": "900", "card": "pm_2"})
        assert unconfirmed.status_code == 503
        assert forms.page("/checkout", unconfirmed.text).token == lost.token
        swept = quick_start.app.test_cli_runner().invoke(args=["submit-once", "resume"])
        assert swept.output.strip() == "created=1"
        assert landed_on(lost.submit({"cents": "900", "card": "pm_2"})) == "/orders/3"
        assert "paid (ch_2)" in forms.client.get("/orders/3").text
    assert provider.charges == ["ch_1", "ch_2"] and sorted(provider.calls.values()) == [1, 1, 2]


# --- The examples the guides include ------------------------------------------------------


@pytest.fixture
def example(
    redis_url: str, database_url: str, database: Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], Flask]]:
    """``example(name)``: ``examples/<name>/app.py``'s app, imported as its folder runs it."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    made: list[tuple[ModuleType, Flask]] = []

    def make(name: str) -> Flask:
        module = importlib.import_module(f"{name}.app")
        app: Flask = module.create_app(
            {
                "SECRET_KEY": "docs",
                "DATABASE_URL": database_url,
                "SQLALCHEMY_DATABASE_URI": database_url,
                "REDIS_URL": redis_url,
                "TESTING": True,
            }
        )
        made.append((module, app))
        return app

    yield make
    for module, app in made:
        with app.test_request_context():
            module.submit_once.session.get_bind().dispose()
            module.submit_once.redis.close()
        metadata = module.Base.metadata if hasattr(module, "Base") else module.db.metadata
        drop_tables(database, *(table.name for table in reversed(metadata.sorted_tables)))


def test_the_newsletter_example_subscribes_once_as_a_plain_form(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("newsletter")
    forms = OnceForms(app.test_client())
    answers = forms.open("/").submit_twice({"email": ADA})
    assert [answer.status_code for answer in answers] == [303, 303]
    forms.assert_once(answers, rows=rows(database, "newsletter_subscriptions"))


def test_the_turbo_example_answers_turbo_as_a_plain_form(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("turbo_signup")
    forms, turbo = OnceForms(app.test_client()), {"Accept": TURBO_ACCEPT}
    page = forms.open("/")
    typo = page.submit({"email": "ada@"}, headers=turbo)
    assert typo.status_code == 422 and "Invalid email address." in typo.text
    answers = page.submit_twice({"email": ADA}, headers=turbo)
    assert [answer.status_code for answer in answers] == [303, 303]
    forms.assert_once(answers, rows=rows(database, "turbo_signups"))


def test_the_htmx_example_redirects_the_signup_and_keeps_two_forms_apart(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("htmx_signup")
    forms = OnceForms(app.test_client())
    shown = forms.client.get("/").text
    signup, question = forms.page("/", shown), forms.page("/", shown, form=1)
    assert signup.url.endswith("/signup") and question.url.endswith("/questions")
    # the sign-up's fragment alone
    typo = signup.submit({"email": "ada@"}, headers=HTMX)
    assert typo.status_code == 422 and typo.text.count("<form") == 1 and 'role="alert"' in typo.text
    # the whole page: the message on its form only
    plain = signup.submit({"email": "ada@"})
    assert plain.text.count("<form") == 2 and plain.text.count('role="alert"') == 1
    assert plain.text.index('role="alert"') < plain.text.index('action="/questions"')
    answers = signup.submit_twice({"email": ADA}, headers=HTMX)
    assert [answer.status_code for answer in answers] == [200, 200]
    assert all("HX-Redirect" in answer.headers for answer in answers)
    forms.assert_once(answers, rows=rows(database, "htmx_signups"))
    # without htmx: the question's own page
    asked = question.submit({"text": ""})
    assert asked.status_code == 422 and "<h1>Your question</h1>" in asked.text


def test_the_htmx_example_answers_the_question_in_place_with_a_fresh_form(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("htmx_signup")
    forms = OnceForms(app.test_client())
    question = forms.open("/", form=1)
    answer = question.submit({"text": "When does it open?"}, headers=HTMX)
    assert answer.status_code == 201 and "When does it open?" in answer.text
    # the form for the next question
    following = forms.page("/", answer.text)
    assert following.token not in (None, question.token)
    assert landed_on(answer) == answer.headers["Content-Location"]
    forms.assert_once([answer], rows=rows(database, "htmx_questions"))
    assert following.submit({"text": "Is it free?"}, headers=HTMX).status_code == 201


def test_the_htmx_example_answers_a_repeated_question_in_place_with_its_result(
    example: Callable[[str], Flask],
) -> None:
    app = example("htmx_signup")
    question = OnceForms(app.test_client()).open("/", form=1)
    answers = question.submit_twice({"text": "When does it open?"}, headers=HTMX)
    assert [answer.status_code for answer in answers] == [201, 200]
    assert all("When does it open?" in answer.text for answer in answers)


def test_the_booking_in_steps_example_books_once_whatever_back_and_next_do(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("booking_in_steps")
    forms, booked = OnceForms(app.test_client()), rows(database, "appointments_in_steps")
    who, day = {"name": "Ada", "email": ADA}, {"day": (date.today() + timedelta(7)).isoformat()}
    first = forms.open("/")
    typo = first.submit({**who, "email": "ada@"})
    assert typo.status_code == 422 and 'value="ada@"' in typo.text
    assert forms.page("/", typo.text).token == first.token
    second = forms.page("/", first.submit(who).text)
    assert second.token == first.token and second.hidden["name"] == "Ada"
    # what no date input sends (a script, an old browser): told, not a 500
    garbled = second.submit({"day": "next tuesday"})
    assert garbled.status_code == 422 and "Not a valid date value." in garbled.text
    past = second.submit({"day": "2000-01-01"})
    assert past.status_code == 422 and "Choose a day from today on." in past.text
    assert forms.page("/", past.text).token == first.token and booked() == 0
    answers = second.submit_twice(day)
    # Back, Back, Next, Book
    answers.append(forms.page("/", first.submit(who).text).submit(day))
    assert [answer.status_code for answer in answers] == [303, 303, 303]
    where = forms.assert_once(answers, rows=booked)
    assert "Ada, on " in forms.client.get(where).text


def test_the_turbo_booking_in_steps_example_swaps_a_step_and_books_once(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("turbo_booking_in_steps")
    forms, turbo = OnceForms(app.test_client()), {"Accept": TURBO_ACCEPT}
    who, day = {"name": "Ada", "email": ADA}, {"day": (date.today() + timedelta(7)).isoformat()}
    first = forms.open("/")
    typo = first.submit({**who, "email": "ada@"}, headers=turbo)
    assert typo.status_code == 422 and '<turbo-frame id="booking">' in typo.text
    step = first.submit(who, headers=turbo)
    assert step.status_code == 200 and '<turbo-frame id="booking">' in step.text
    second = forms.page("/", step.text)
    assert second.token == first.token
    answers = second.submit_twice(day, headers=turbo)
    assert [answer.status_code for answer in answers] == [303, 303]
    forms.assert_once(answers, rows=rows(database, "appointments_in_steps"))


def test_the_uploads_guides_suite_passes_against_its_example(
    tmp_path: Path, redis_url: str, database_url: str, database: Engine
) -> None:
    write(tmp_path, files_of(DOCS / "uploads.md"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "."],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")])
            ),
            "SECRET_KEY": "docs",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and re.search(r"\b3 passed", run.stdout), run.stdout + run.stderr
    drop_tables(database, "referrals")


def sent_large(page: FormPage, data: dict[str, object]) -> tuple[int, str]:
    """``page`` submitted with a body too large for Werkzeug's test client to close: the
    temporary file it spools the body to is left for the garbage collector, which
    finalises it here, its ResourceWarning ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        answer = page.submit(data, headers=HTMX)
        status, html = answer.status_code, answer.text
        del answer
        gc.collect()
    return status, html


LETTER = b"%PDF-1.7\n" + bytes(range(256)) * 64
PATIENT = {"patient": "Ada Lovelace", "born": "1815-12-10"}


def test_the_referral_example_keeps_the_letter_on_a_422_and_sends_it_once(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("referral_letter")
    forms, referrals = OnceForms(app.test_client()), rows(database, "referrals")
    page = forms.open("/")
    typo = page.submit({**PATIENT, "born": "10/12/1815", "letter": (LETTER, "letter.pdf")})
    assert typo.status_code == 422 and "Kept: letter.pdf" in typo.text
    again = forms.page("/", typo.text)
    assert again.token == page.token and referrals() == 0
    # sent again without picking the letter: the kept one goes with it, once
    answers = again.submit_twice(PATIENT)
    assert [answer.status_code for answer in answers] == [303, 303]
    where = forms.assert_once(answers, rows=referrals)
    receipt = forms.client.get(where).text
    assert hashlib.sha256(LETTER).hexdigest() in receipt and "letter.pdf" in receipt


def test_the_referral_example_tells_another_letter_with_a_used_token_and_keeps_it(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("referral_letter")
    forms, referrals = OnceForms(app.test_client()), rows(database, "referrals")
    page = forms.open("/")
    answers = page.submit_twice({**PATIENT, "letter": (LETTER, "letter.pdf")}, headers=HTMX)
    assert [answer.status_code for answer in answers] == [200, 200]
    first = forms.assert_once(answers, rows=referrals)
    # the corrected letter, of the same name, sent with the used token: told, not dropped
    corrected = page.submit({**PATIENT, "letter": (LETTER + b"!", "letter.pdf")}, headers=HTMX)
    assert corrected.status_code == 409 and "Kept: letter.pdf" in corrected.text
    assert f'href="{first}"' in corrected.text
    assert corrected.text.count("<form") == 1 and referrals() == 1
    sent = forms.page("/", corrected.text).submit(PATIENT, headers=HTMX)
    assert sent.status_code == 200 and landed_on(sent) not in (None, first)
    receipt = forms.client.get(landed_on(sent)).text
    assert hashlib.sha256(LETTER + b"!").hexdigest() in receipt and referrals() == 2


def test_the_referral_example_tells_a_letter_too_large_or_of_another_type(
    example: Callable[[str], Flask], database: Engine
) -> None:
    app = example("referral_letter")
    forms, referrals = OnceForms(app.test_client()), rows(database, "referrals")
    page = forms.open("/")
    wrong = page.submit({**PATIENT, "letter": (b"MZ", "letter.exe")})
    assert wrong.status_code == 422 and "Attach a PDF, PNG or JPEG." in wrong.text
    status, html = sent_large(page, {**PATIENT, "letter": (bytes(2 * 1024 * 1024 + 1), "a.pdf")})
    assert status == 422 and "at most 2 MiB" in html and 'value="Ada Lovelace"' in html
    # past what is read at all: 413 before the token, the form again saying why
    status, html = sent_large(page, {**PATIENT, "letter": (bytes(9 * 1024 * 1024), "a.pdf")})
    assert status == 413 and "too large" in html and html.count("<form") == 1
    assert page.submit({**PATIENT, "letter": (LETTER, "letter.pdf")}).status_code == 303
    assert referrals() == 1


# --- Names, settings and paths ------------------------------------------------------------


def extension_and_template_object() -> tuple[Flask, object]:
    app = Flask(__name__)
    app.secret_key = "docs"
    # sends no command: nothing needs to listen
    SubmitOnce(app, client=redis.Redis())
    return app, app.jinja_env.globals["submit_once"]


#: Names of other projects the pages mention, in backticks.
ELSEWHERE = {
    "CSRFProtect",
    "CSRFError",
    "FlaskForm",
    "ProxyFix",
    "RedisCluster",
    "Sentinel",
    "Location",
    "Content-Location",
    "HX-Redirect",
    "HX-Request",
    "Retry-After",
    "Vary",
    "Cache-Control",
    "Accept",
    "Idempotency-Key",
    "Idempotent-Replayed",
    "GETDEL",
    "EXISTS",
    "SET",
    "EVALSHA",
    "INCRBY",
    "EXPIRE",
    "ROLLBACK",
    "COMMIT",
    "INSERT",
    "SELECT",
    "DEL",
    "TESTING",
    "REDIS_URL",
    "SECRET_KEY",
    "DATABASE_URL",
    "WTF_CSRF_TIME_LIMIT",
    "MAX_CONTENT_LENGTH",
    "X-CSRFToken",
    "X-Submit-Once-Token",
    "X-Submit-Once-Check",
    "Vary: Cookie",
    "SignUpForm",
    "Signup",
    "Booking",
    "Event",
    "Question",
    "FileField",
    "FileRequired",
    "FileAllowed",
    "FileSize",
    "LargeBinary",
    "None",
    "True",
    "False",
}
#: Words of the old API that no page may use any more (the CHANGELOG names them on purpose).
STALE = [
    r"\bFormTokens",
    r"\bOnceForm\b",
    r"\bform_token_input\b",
    r"\bFORM_TOKENS_",
    r"\bBackShowsTheFormAsSent\b",
    r"the one Failed",
    r"already placed",
    r"X-Form-Token",
    r"\b(import|from) submit_once\b",
    r"submit_once\.redis_urls",
    r"\.\./\.\./",
    r"(?<![\w.])once\.(message|existing_url|tokens)\b",
]


@by_page
def test_no_page_uses_a_word_of_the_old_api(page: Path) -> None:
    text = page.read_text()
    assert [word for word in STALE if re.search(word, text)] == []


def resolves(dotted: str) -> bool:
    """Whether ``flask_submit_once.<...>`` names something that exists."""
    parts, obj = dotted.split("."), None
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


#: Names of 0.10 that 1.0 renamed, which a page may give with their new names: the library
#: still knows them, to say what each is called now.
RENAMED_SETTINGS = {f"SUBMIT_ONCE_{old}" for old in RENAMED}
RENAMED_NAMES = set(flask_submit_once._RENAMED)


def unknown_names(text: str) -> list[str]:
    """The names ``text`` mentions as the library's that it does not have: dotted
    ``flask_submit_once`` paths, the extension's or the template object's attributes
    (``submit_once.x``), a root name's attributes, ``once_forms.x``, settings, outcome kinds,
    and backticked names in the prose that are neither the library's nor other projects'
    (a name 1.0 renamed is the library's: it answers with the new one)."""
    app, template_object = extension_and_template_object()
    kinds = typing.get_args(typing.get_type_hints(flask_submit_once.Outcome)["kind"])
    roots = "|".join(name for name in flask_submit_once.__all__ if name != "signals")
    prose = FENCE.sub("", text)
    return [
        *(name for name in re.findall(r"flask_submit_once(?:\.\w+)+", text) if not resolves(name)),
        *(
            f"submit_once.{attr}"
            for attr in re.findall(r"(?<![\w.])submit_once\.(\w+)", text)
            if not hasattr(SubmitOnce, attr) and not hasattr(type(template_object), attr)
        ),
        *(
            f"{owner}.{attr}"
            for owner, attr in re.findall(rf"\b({roots})\.(\w+)", text)
            if not hasattr(getattr(flask_submit_once, owner), attr)
        ),
        *(
            f"once_forms.{attr}"
            for attr in re.findall(r"\bonce_forms\.(\w+)", text)
            if not hasattr(OnceForms, attr)
        ),
        *(
            setting
            for setting in re.findall(r"SUBMIT_ONCE_\w+", text)
            if setting not in app.config
            and setting not in RENAMED_SETTINGS
            and not setting.startswith("SUBMIT_ONCE_TEST_")
        ),
        *(kind for kind in re.findall(r'kind(?:=| == )"(\w+)"', text) if kind not in kinds),
        *(
            name
            for name in re.findall(r"`([A-Z]\w*(?:-[\w-]+)?)`", prose)
            if name not in flask_submit_once.__all__
            and name not in RENAMED_NAMES
            and name not in ELSEWHERE
            and not name.startswith(("SUBMIT_ONCE_", "FLASK_"))
        ),
    ]


@by_page
def test_every_library_name_a_page_mentions_exists(page: Path) -> None:
    assert unknown_names(page.read_text()) == []


def test_the_name_check_sees_names_that_are_not_there() -> None:
    text = (
        "`FormTokens`, `SubmitOnce`, submit_once.form, submit_once.message, submit_once.nope, "
        "flask_submit_once.testing.landed_on, flask_submit_once.Nope, Outcome.landed, "
        "TokenStore.issue_many, once_forms.open, once_forms.nope, SUBMIT_ONCE_TTL_SECONDS, "
        'SUBMIT_ONCE_NOPE, kind="created", kind == "placed"'
    )
    assert unknown_names(text) == [
        "flask_submit_once.Nope",
        "submit_once.nope",
        "Outcome.landed",
        "TokenStore.issue_many",
        "once_forms.nope",
        "SUBMIT_ONCE_NOPE",
        "placed",
        "FormTokens",
    ]


def test_the_testing_guide_names_every_helper_of_the_plugin() -> None:
    text = (DOCS / "testing.md").read_text()
    helpers = {
        *testing.__all__,
        *(f"once_forms.{name}" for name in ("open", "page", "clone", "assert_once")),
        *(f"page.{name}" for name in ("submit", "submit_twice", "submit_concurrently", "fields")),
    }
    assert sorted(helper for helper in helpers if helper not in text) == []
    public = {
        name
        for cls in (OnceForms, FormPage)
        for name in vars(cls)
        if not name.startswith("_") and callable(getattr(cls, name))
    }
    assert public == {
        "open",
        "page",
        "clone",
        "assert_once",
        "submit",
        "submit_twice",
        "submit_concurrently",
        "fields",
    }, "a helper the guide does not name"
    assert "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE" in text and "429" in text


def test_the_htmx_configuration_swaps_every_status_a_form_comes_back_with() -> None:
    """An answer htmx drops is a form that did nothing: the user sends it again."""
    import json

    from flask_submit_once._answers import AGAIN

    layout = (EXAMPLES / "htmx_signup" / "templates" / "layout.html").read_text()
    config = json.loads(re.search(r'name="htmx-config" content=\'(.*?)\'>', layout, re.S)[1])

    def swapped(status: int) -> bool:
        rule = next(r for r in config["responseHandling"] if re.search(r["code"], str(status)))
        return bool(rule["swap"]) and not rule.get("error", False)

    assert sorted({status for status, _ in AGAIN.values() if not swapped(status)}) == []
    guide = (DOCS / "htmx.md").read_text()
    assert "429" in guide and "htmx:beforeSwap" in guide


def test_the_testing_guide_says_which_settings_a_load_test_needs() -> None:
    load_tests = (DOCS / "testing.md").read_text().split("## Load tests", 1)[1]
    for setting in ("MAX_FORMS_PER_CLIENT_PER_MINUTE", "MAX_FORMS_PER_SESSION"):
        assert f"SUBMIT_ONCE_{setting}" in load_tests


def test_the_settings_page_gives_every_setting_and_its_default() -> None:
    app, _ = extension_and_template_object()
    table = dict(
        re.findall(
            r"^\| `(SUBMIT_ONCE_\w+)` \| `([^`]*)` \|",
            # The first table: every setting (the page's later ones are about renames).
            (DOCS / "settings.md").read_text().split("\n## ", 1)[0],
            re.M,
        )
    )
    assert table.pop("SUBMIT_ONCE_REDIS_URL") == "REDIS_URL"
    assert table == {
        key: str(app.config[key])
        for key in app.config
        if key.startswith("SUBMIT_ONCE_") and key != "SUBMIT_ONCE_REDIS_URL"
    }


def test_the_plain_guide_gives_each_reasons_status_and_token() -> None:
    # the library's own table: what it answers
    from flask_submit_once._answers import AGAIN

    rows = re.findall(
        r"^\|[^|]*\(`(\w+)`\)[^|]*\| (\d{3})[^|]*\|[^|]*\| (the same|a fresh one|"
        r"the same: [^|]*|fresh ones[^|]*) \|",
        (DOCS / "plain.md").read_text(),
        re.M,
    )
    shown = {
        reason: (int(status), "same" if token.startswith("the same") else "fresh")
        for reason, status, token in rows
    }
    assert shown == dict(AGAIN)


def test_the_pattern_page_lists_every_signal_and_every_kind_it_sends() -> None:
    text = (DOCS / "pattern.md").read_text()
    table = re.findall(r"^\| `(\w+)` \|([^\n]*)$", text, re.M)
    assert {name for name, _ in table} == set(signals.__all__)
    decided = dict(table)["submit_decided"]
    kinds = typing.get_args(typing.get_type_hints(flask_submit_once.Outcome)["kind"])
    assert [kind for kind in kinds if f"`{kind}`" not in decided] == []


def test_the_upgrade_note_maps_old_names_to_names_that_exist() -> None:
    note = CHANGELOG.read_text().split("### Upgrading from 0.9", 1)[1].split("\n## ", 1)[0]
    app, template_object = extension_and_template_object()
    for old, new in re.findall(r"^\| (.+?) \| (.+?) \|$", note, re.M)[2:]:
        for name in re.findall(r"`([A-Z]\w+)`", old):
            assert name not in vars(flask_submit_once) and name not in app.config, name
        # A name 0.10 introduced and 1.0 renamed is still known: it answers with the new.
        for name in re.findall(r"`([A-Z][A-Za-z]+|SUBMIT_ONCE_\w+)`", new):
            assert (
                name in flask_submit_once.__all__
                or name in app.config
                or name in RENAMED_NAMES | RENAMED_SETTINGS
            ), name
        for attr in re.findall(r"(?<![\w.])submit_once\.(\w+)", new):
            assert hasattr(SubmitOnce, attr) or hasattr(type(template_object), attr), attr
    assert "SubmissionMixin" in note and "client=" in note and "endpoint" in note


# A path as a page writes one; what may not appear at all is the shop's around this folder.
PATH = re.compile(
    r"(?<![\w/.-])((?:bench|scripts|webapp|dev|\.ci|static|tests|docs|examples|"
    r"src)/[\w./*-]*[\w*/])"
)
NOT_HERE = {
    "docs/_build": "what the README's Sphinx command writes",
    "static/signup.js": "the reader's own script, in fetch.md",
}


@by_page
def test_a_page_names_nothing_outside_this_folder(page: Path) -> None:
    text = page.read_text()
    outside = [
        path
        for path in PATH.findall(text)
        if path.split("/")[0] in ("bench", "scripts", "webapp", "dev", ".ci")
    ]
    missing = [
        path
        for path in PATH.findall(text)
        if path not in NOT_HERE
        and not any((base / path).exists() for base in (LIBRARY, page.parent, EXAMPLES))
    ]
    included = re.findall(r"```\{(?:literal)?include\} (\S+)", text)
    linked = [
        target
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        if not re.match(r"[a-z]+://", target)
    ]
    escaping = [
        target
        for target in included + linked
        if not (page.parent / target).resolve().is_relative_to(LIBRARY)
        or not (page.parent / target).exists()
    ]
    assert (outside, missing, escaping) == ([], [], [])


@pytest.mark.parametrize(
    ("page", "copy", "version"),
    [
        ("htmx.md", "htmx_signup/static/htmx.min.js", 'version:"2.0.11"'),
        ("turbo.md", "turbo_signup/static/turbo.es2017-umd.js", "Turbo 8.0.23"),
    ],
)
def test_the_guides_say_which_script_to_get_and_its_hash_is_the_shipped_copys(
    page: str, copy: str, version: str
) -> None:
    text, shipped = (DOCS / page).read_text(), (EXAMPLES / copy).read_bytes()
    digest = base64.b64encode(hashlib.sha384(shipped).digest()).decode()
    assert f'integrity="sha384-{digest}"' in text and version.encode() in shipped
    assert re.sub(r"\D+", ".", version).strip(".") in text


# --- The build ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("html")
    # -W: a warning (an unresolved reference, a docstring that is not valid reST, an
    # include whose lines moved) fails it.
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    return (out / "api.html").read_text()


def test_the_docs_build_without_a_warning(api_page: str) -> None:
    assert "The extension" in api_page


@pytest.mark.parametrize(
    "name",
    [
        *sorted(set(flask_submit_once.__all__) - {"signals"}),
        *(f"testing.{name}" for name in testing.__all__),
    ],
)
def test_every_public_name_is_documented(api_page: str, name: str) -> None:
    # Documented means an entry of its own (its anchor), not a mention in passing.
    assert f'id="flask_submit_once.{name}"' in api_page, name


def test_the_shipped_inventories_are_what_make_inventories_writes() -> None:
    check = subprocess.run(
        [sys.executable, str(DOCS / "make_inventories.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
