"""An edit of an existing row (edits_app.py): a repeat of the same edit lands once, and an
edit made from a page drawn before another edit landed is told so, with the row as it is
now and the input kept, instead of silently writing over it. On a real Redis and
PostgreSQL."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import sessionmaker
from sqlalchemy.orm.exc import StaleDataError
from werkzeug.test import TestResponse

import edits_app
from flask_submit_once import Outcome, signals
from flask_submit_once.testing import FormPage, OnceForms

HOME, MOVED, OTHER = "1 Old Road", "2 New Street", "3 Other Lane"
TOLD = "changed since you opened it"


@pytest.fixture(scope="module")
def tables(engine: Engine) -> Iterator[Engine]:
    edits_app.Base.metadata.drop_all(engine)
    edits_app.Base.metadata.create_all(engine)
    yield engine
    edits_app.Base.metadata.drop_all(engine)


@pytest.fixture
def app(tables: Engine, redis_url: str, rdb: object) -> Iterator[Flask]:
    """The edits app, with one patient at version 1."""
    with tables.begin() as conn:
        conn.execute(text("TRUNCATE address_changes, patients RESTART IDENTITY"))
    with sessionmaker(tables)() as db:
        db.add(edits_app.Patient(name="Ada", address=HOME))
        db.commit()
    app = edits_app.create_app(sessionmaker(tables), REDIS_URL=redis_url)
    yield app
    with app.app_context():
        edits_app.submit_once.redis.close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def patient(tables: Engine) -> Callable[[], tuple[str, int, int]]:
    """``patient()``: the patient's address and version, and how many changes landed."""

    def now() -> tuple[str, int, int]:
        with sessionmaker(tables)() as db:
            row = db.scalars(select(edits_app.Patient).filter_by(id=1)).one()
            changes = len(db.scalars(select(edits_app.AddressChange)).all())
            return row.address, row.version, changes

    return now


def shown_address(answer: TestResponse) -> str:
    """The address the page says the patient has now."""
    found = re.search(r'<p id="now">Ada lives at (.*?)\.</p>', answer.text)
    assert found, answer.text
    return found.group(1)


def test_a_storm_of_one_edit_lands_once_and_bumps_the_version_once(once_forms, patient):
    page = once_forms.open("/patients/1")
    assert page.hidden["submit_once_version"] == "1"
    answers = page.submit_concurrently({"address": MOVED} for _ in range(20))
    assert {answer.status_code for answer in answers} == {303}
    assert once_forms.assert_once(answers, rows=lambda: patient()[2]) == "/patients/1"
    assert patient() == (MOVED, 2, 1)


def test_a_second_tab_drawn_before_the_first_edit_is_told_with_both_versions_and_its_input(
    once_forms, patient
):
    first, second = once_forms.open("/patients/1"), once_forms.open("/patients/1")
    assert first.submit({"address": MOVED}).status_code == 303
    stale = second.submit({"address": OTHER})
    assert stale.status_code == 409 and TOLD in stale.text
    # Both versions: the row as it is now, and what this tab typed.
    assert shown_address(stale) == MOVED and f'value="{OTHER}"' in stale.text
    assert patient() == (MOVED, 2, 1)
    # Drawn again at the version it shows, with its token good again: sent once more,
    # the user's input is saved over what they have now seen.
    again = once_forms.page("/patients/1", stale.text)
    assert again.hidden["submit_once_version"] == "2" and again.token == second.token
    assert again.submit({"address": OTHER}).status_code == 303
    assert patient() == (OTHER, 3, 2)


def test_a_double_click_in_the_stale_tab_is_told_twice_and_writes_nothing(once_forms, patient):
    first, second = once_forms.open("/patients/1"), once_forms.open("/patients/1")
    first.submit({"address": MOVED})
    answers = second.submit_twice({"address": OTHER})
    assert [answer.status_code for answer in answers] == [409, 409]
    assert all(TOLD in answer.text for answer in answers)
    assert patient() == (MOVED, 2, 1)


def test_the_same_edit_sent_again_after_it_landed_is_answered_with_its_result(once_forms, patient):
    page = once_forms.open("/patients/1")
    landed = page.submit({"address": MOVED})
    # Back + submit, even after another edit landed since: the result, never a conflict.
    assert page.submit({"address": MOVED}).headers["Location"] == landed.headers["Location"]
    once_forms.open("/patients/1").submit({"address": OTHER})
    assert page.submit({"address": MOVED}).status_code == 303
    assert patient() == (OTHER, 3, 2)


def test_two_tabs_sent_at_the_same_moment_write_once_and_the_other_is_told(
    once_forms: OnceForms, patient
):
    """Both read the row at version 1: whichever UPDATEs second finds the version the
    first wrote (the version counter's WHERE), so it is told, not written over."""
    pages = [once_forms.open("/patients/1"), once_forms.open("/patients/1")]
    clients = [once_forms.clone(), once_forms.clone()]
    answers: dict[str, TestResponse] = {}
    start = threading.Barrier(2)

    def send(page: FormPage, client: FlaskClient, address: str) -> None:
        start.wait()
        answers[address] = page.submit({"address": address}, client=client)

    threads = [
        threading.Thread(target=send, args=(page, client, address))
        for page, client, address in zip(pages, clients, (MOVED, OTHER), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answer.status_code for answer in answers.values()) == [303, 409]
    landed = next(address for address, answer in answers.items() if answer.status_code == 303)
    told = next(answer for answer in answers.values() if answer.status_code == 409)
    assert TOLD in told.text and shown_address(told) == landed
    assert patient() == (landed, 2, 1)


def test_an_edit_committed_between_the_views_read_and_its_write_is_caught_by_the_update(
    once_forms, patient, tables, monkeypatch
):
    """The page's version was the row's when the view read it: the version counter's
    ``UPDATE ... WHERE version = 1`` finds 2 and writes nothing; told as stale."""

    def another_edit() -> None:
        with sessionmaker(tables)() as db:
            db.scalars(select(edits_app.Patient).filter_by(id=1)).one().address = OTHER
            db.commit()

    page = once_forms.open("/patients/1")
    monkeypatch.setattr(edits_app, "between_read_and_write", another_edit)
    outcomes: list[Outcome] = []
    with signals.submit_decided.connected_to(
        lambda _, outcome, **__: outcomes.append(outcome), once_forms.client.application
    ):
        stale = page.submit({"address": MOVED})
    assert stale.status_code == 409 and TOLD in stale.text
    (outcome,) = outcomes
    assert isinstance(outcome.error.__cause__, StaleDataError)
    assert isinstance(outcome.result, edits_app.Patient)
    assert shown_address(stale) == OTHER and f'value="{MOVED}"' in stale.text
    assert patient() == (OTHER, 2, 0)


def test_an_api_edit_racing_another_is_a_409_and_its_key_retried_applies_it(
    client, patient, tables, monkeypatch
):
    """An idempotent view carries no page version, but SQLAlchemy's counter still refuses
    to write over an edit that committed while it ran: the key is given back."""

    def another_edit() -> None:
        monkeypatch.setattr(edits_app, "between_read_and_write", None)
        with sessionmaker(tables)() as db:
            db.scalars(select(edits_app.Patient).filter_by(id=1)).one().address = OTHER
            db.commit()

    def put() -> TestResponse:
        return client.put(
            "/api/patients/1/address", json={"address": MOVED}, headers={"Idempotency-Key": "k1"}
        )

    monkeypatch.setattr(edits_app, "between_read_and_write", another_edit)
    raced = put()
    assert raced.status_code == 409 and raced.json["reason"] == "stale"  # type: ignore[index]
    assert patient() == (OTHER, 2, 0)
    assert put().status_code == 201 and patient() == (MOVED, 3, 1)


def test_a_script_is_told_the_record_is_stale_in_json(once_forms, patient):
    first, second = once_forms.open("/patients/1"), once_forms.open("/patients/1")
    first.submit({"address": MOVED})
    stale = second.submit({"address": OTHER}, json=True)
    assert stale.status_code == 409 and stale.json["reason"] == "stale"  # type: ignore[index]
    assert stale.json["form_token"] == second.token  # type: ignore[index]
    assert patient() == (MOVED, 2, 1)


@pytest.mark.parametrize("version", ["", "two", "-1", "1" * 40, "٢"], ids=repr)
def test_a_version_that_is_not_one_is_told_stale_and_writes_nothing(once_forms, patient, version):
    page = once_forms.open("/patients/1")
    stale = page.submit({"address": MOVED, "submit_once_version": version})
    assert stale.status_code == 409 and TOLD in stale.text
    assert patient() == (HOME, 1, 0)


def test_two_tabs_each_sent_ten_times_at_once_tell_every_repeat_of_the_stale_one_so(
    app, once_forms, patient
):
    """The edit that loses the race is refused at its flush: the lock of its token is held
    until the token is good again, so each repeat waiting for it is told the row changed
    (all ten), never that the form expired, and can be sent again over what it shows."""
    kinds: list[str] = []
    first, second = once_forms.open("/patients/1"), once_forms.open("/patients/1")
    answers: dict[str, list[TestResponse]] = {}
    sent = [
        threading.Thread(
            target=lambda page=page, address=address: answers.setdefault(
                address, page.submit_concurrently([{"address": address}] * 10)
            )
        )
        for page, address in ((first, MOVED), (second, OTHER))
    ]
    with signals.submit_decided.connected_to(
        lambda _, outcome, **__: kinds.append(outcome.kind), app
    ):
        for thread in sent:
            thread.start()
        for thread in sent:
            thread.join(60)
    statuses = sorted({answer.status_code for answer in tab} for tab in answers.values())
    assert statuses == [{303}, {409}]
    assert "expired" not in kinds and kinds.count("stale") == 10
    landed = patient()
    assert landed[1:] == (2, 1) and landed[0] in (MOVED, OTHER)
