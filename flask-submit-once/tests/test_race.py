"""Submits that overlap: duplicates arriving while the first still runs (the advisory
lock and the one GETDEL decide), two versions of one rendering at once, and a script
asking what became of a submit (``X-Submit-Once-Check``) while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from flask_submit_once import signals

ADA = {"email": "ada@example.com", "name": "Ada", "quantity": "2"}
CHECK = {"X-Submit-Once-Check": "1"}


class Held:
    """Holds the first submit that takes its token (at ``token_consumed``: inside its
    transaction, holding the lock) until released, or until ``until()`` is true."""

    def __init__(self, until: Callable[[], bool] | None = None) -> None:
        self.taken, self.released = threading.Event(), threading.Event()
        self.until = until
        self.changed = threading.Condition()

    def __call__(self, sender: object, **extra: object) -> None:
        if self.taken.is_set():
            return
        self.taken.set()
        with self.changed:
            assert self.changed.wait_for(
                lambda: self.released.is_set() or (self.until is not None and self.until()), 30
            )

    def release(self) -> None:
        with self.changed:
            self.released.set()
            self.changed.notify_all()


@pytest.fixture
def decided(app) -> Iterator[list[str]]:
    """The kind of every submit's outcome, in the order they were decided."""
    kinds: list[str] = []

    def receiver(sender, outcome, **extra):
        kinds.append(outcome.kind)

    signals.submit_decided.connect(receiver, sender=app)
    yield kinds
    signals.submit_decided.disconnect(receiver, sender=app)


@pytest.fixture
def held(app) -> Iterator[Callable[..., Held]]:
    made: list[Held] = []

    def hold(until: Callable[[], bool] | None = None) -> Held:
        made.append(Held(until))
        signals.token_consumed.connect(made[-1], sender=app)
        return made[-1]

    yield hold
    for one in made:
        one.release()
        signals.token_consumed.disconnect(one, sender=app)


def test_ten_tabs_at_once_make_one_row_while_the_first_holds_the_token(
    app, once_forms, held, decided, signups
):
    entered = []

    # every request that reached the app
    def counting(wsgi):
        def app_(environ, start_response):
            entered.append(environ["PATH_INFO"])
            with hold.changed:
                hold.changed.notify_all()
            return wsgi(environ, start_response)

        return app_

    page = once_forms.open("/signup")
    app.wsgi_app = counting(app.wsgi_app)
    # the other nine arrive meanwhile
    hold = held(until=lambda: len(entered) == 10)
    answers = page.submit_concurrently([ADA] * 10)
    assert {(a.status_code, a.headers["Location"]) for a in answers} == {(303, "/thanks/1")}
    assert hold.taken.is_set() and sorted(decided) == ["created"] + ["duplicate"] * 9
    assert signups() == ["ada@example.com"]


def test_two_versions_of_one_rendering_at_once_make_one_row_and_the_other_is_told(
    once_forms, signups
):
    page = once_forms.open("/signup")
    grace = {**ADA, "email": "grace@example.com"}
    answers = page.submit_concurrently([ADA, grace])
    assert sorted(a.status_code for a in answers) == [303, 409]
    (saved,) = signups()
    told = next(a for a in answers if a.status_code == 409)
    assert "already used, with other details" in told.text
    # it shows what it sent, kept for the user to resend
    assert saved not in told.text


def test_a_script_can_ask_what_became_of_a_submit_without_spending_it(
    app, once_forms, held, signups
):
    page = once_forms.open("/signup")
    before = page.submit({}, headers=CHECK)
    assert before.json == {"status": "not_done", "location": None}
    hold = held()
    first = threading.Thread(target=page.submit, args=(ADA,), kwargs={"client": once_forms.clone()})
    first.start()
    try:
        assert hold.taken.wait(30)
        assert page.submit({}, headers=CHECK).json == {"status": "running", "location": None}
    finally:
        hold.release()
        first.join(30)
    assert page.submit({}, headers=CHECK).json == {"status": "done", "location": "/thanks/1"}
    assert page.submit({}, headers=CHECK, json=True).json["status"] == "done"
    assert signups() == ["ada@example.com"]


def test_asking_spends_nothing_so_the_submit_after_it_makes_the_row(once_forms, signups):
    page = once_forms.open("/signup")
    for _ in range(3):
        assert page.submit({}, headers=CHECK).json["status"] == "not_done"
    assert page.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]
