"""Redis stopped, restarted empty, flushed, or giving a spent token back, between a form's
rendering and its submit. Every scenario ends with no second row, every user sent to a
row that exists, and every submit that did not land showing the input with a way on.

These tests stop and restart a Redis of their own (``own_redis``, persistent: a clean
stop and start keeps its keys)."""

from __future__ import annotations

import logging
import secrets

import pytest
import redis
from sqlalchemy import event, func, select

from flask_submit_once import signals
from flask_submit_once.testing import OnceForms
from servers import end_connection
from signup_app import Comment

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}


@pytest.fixture
def app(make_app, own_redis):
    return make_app(REDIS_URL=own_redis.url)


def token_keys(url: str) -> list[str]:
    with redis.Redis.from_url(url, decode_responses=True) as rdb:
        return [key for key in rdb.keys("so:*") if not key.startswith("so:issued:")]


def kept(answer, status: int, words: str) -> None:
    assert answer.status_code == status and words in answer.text, answer.text[:300]
    assert 'value="ada@example.com"' in answer.text and 'value="Ada Lovelace"' in answer.text
    assert "Traceback" not in answer.text


def another_worker(make_app, once_forms, url: str):
    """The same browser, answered by another process of the app (nothing remembered)."""
    client = make_app(REDIS_URL=url).test_client()
    client.set_cookie("session", once_forms.client.get_cookie("session").value)
    return client


def test_redis_away_when_a_form_is_opened_is_a_503_page_and_the_form_opens_after(client, own_redis):
    own_redis.stop()
    away = client.get("/signup")
    assert away.status_code == 503 and "could not reach our systems" in away.text
    assert "Traceback" not in away.text
    own_redis.start()
    assert client.get("/signup").status_code == 200


def test_redis_away_at_submit_keeps_the_input_and_the_token_which_works_after(
    once_forms, own_redis, signups
):
    page = once_forms.open("/signup")
    own_redis.stop()
    away = page.submit(ADA)
    kept(away, 503, "could not reach our systems")
    assert away.headers["Retry-After"] == "5"
    assert once_forms.page("/signup", away.text).token == page.token and signups() == []
    own_redis.start()
    assert page.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]


@pytest.mark.parametrize("loss", ["restarted-empty", "flushall"])
def test_redis_losing_every_token_is_an_expired_form_with_the_input_kept(
    once_forms, own_redis, signups, loss
):
    page = once_forms.open("/signup")
    if loss == "restarted-empty":
        own_redis.restart_empty()
    else:
        with redis.Redis.from_url(own_redis.url) as rdb:
            rdb.flushall()
    expired = page.submit(ADA)
    kept(expired, 409, "had expired or was already used")
    fresh = once_forms.page("/signup", expired.text)
    assert fresh.token != page.token and signups() == []
    assert fresh.submit(ADA).headers["Location"] == "/thanks/1"
    # the old rendering: never a second row
    assert page.submit(ADA).status_code == 422
    assert signups() == ["ada@example.com"]


def test_a_spent_token_that_reappears_lands_on_its_row_by_the_unique_column(
    make_app, once_forms, own_redis, sessions, caplog
):
    """A replica promoted before it saw the GETDEL gives the spent token back: the next
    GETDEL succeeds, and the INSERT meets the UNIQUE digest (the comment form, whose
    fields stay valid however often it is sent)."""
    page = once_forms.open("/signup", form=1)
    before = set(token_keys(own_redis.url))
    assert page.submit({"text": "Hello"}).status_code == 303
    # the token the submit spent
    (key,) = before - set(token_keys(own_redis.url))
    with redis.Redis.from_url(own_redis.url) as rdb:
        # A worker that never saw the submit land, then the one that did.
        for client in (another_worker(make_app, once_forms, own_redis.url), None):
            rdb.set(key, 1, ex=60)
            again = page.submit({"text": "Hello"}, client=client)
            assert (again.status_code, again.headers["Location"]) == (303, "/comments/1")
            assert rdb.exists(key) == 0, "the token that came back was spent, not left live"
    assert "came back in Redis; the unique constraint held" in caplog.text
    with sessions() as db:
        assert db.scalar(select(func.count()).select_from(Comment)) == 1


@pytest.mark.ends_server_connection
def test_a_spent_token_that_reappears_with_the_database_lost_at_the_unique_column_is_unsure(
    make_app, once_forms, own_redis, engine
):
    """As above, and the connection dies as the INSERT meets the UNIQUE digest (a failover
    of both): the answer is that we could not confirm (503, the input, the same token),
    never the app's error page, and that token, sent again, lands on the row."""
    page = once_forms.open("/signup", form=1)
    before = set(token_keys(own_redis.url))
    assert page.submit({"text": "Hello"}).status_code == 303
    (key,) = before - set(token_keys(own_redis.url))
    worker, ended = another_worker(make_app, once_forms, own_redis.url), []

    def end_the_connection(context) -> None:
        if context.is_disconnect or ended:
            return
        ended.append(context.connection.connection.dbapi_connection.info.backend_pid)
        end_connection(engine, ended[0])

    with redis.Redis.from_url(own_redis.url) as rdb:
        rdb.set(key, 1, ex=60)
        event.listen(engine, "handle_error", end_the_connection)
        try:
            unsure = page.submit({"text": "Hello"}, client=worker)
        finally:
            event.remove(engine, "handle_error", end_the_connection)
    assert ended and unsure.status_code == 503 and unsure.headers["Retry-After"]
    assert "Hello" in unsure.text and "could not confirm" in unsure.text.lower()
    same = once_forms.page("/signup", unsure.text, form=1)
    assert same.token == page.token
    again = same.submit({"text": "Hello"}, client=worker)
    assert (again.status_code, again.headers["Location"]) == (303, "/comments/1")


def test_with_the_fallback_redis_away_at_submit_lets_the_database_decide_once(
    make_app, once_forms, own_redis, signups
):
    """SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS: a double click and eight more tabs retrying, all
    while Redis is away, land on one row; the lock and the UNIQUE column decide."""
    app = make_app(REDIS_URL=own_redis.url, SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=True)
    once_forms = OnceForms(app.test_client())
    made = []

    def decided(sender, outcome, **extra):
        made.append(outcome.kind)

    page = once_forms.open("/signup")
    own_redis.stop()
    with signals.submit_decided.connected_to(decided, sender=app):
        answers = page.submit_concurrently([ADA] * 10)
    assert {(a.status_code, a.headers.get("Location")) for a in answers} == {(303, "/thanks/1")}
    assert sorted(made) == ["created"] + ["duplicate"] * 9
    # Redis is back with the token still live (it persists): the UNIQUE column stops it.
    own_redis.start()
    again = page.submit(ADA, client=another_worker(make_app, once_forms, own_redis.url))
    assert again.headers["Location"] == "/thanks/1" and signups() == ["ada@example.com"]


def made_up() -> str:
    """A well-formed token the server never issued."""
    return secrets.token_urlsafe(32)


@pytest.mark.parametrize(
    "sign_forms, status, words",
    [
        (True, 409, "had expired or was already used"),
        # No fresh token can be had: the expired form's answer while Redis is away.
        (False, 503, "could not reach our systems"),
    ],
    ids=["signed-forms", "no-signed-forms"],
)
def test_with_the_fallback_redis_away_a_made_up_token_is_expired_and_makes_no_row(
    make_app, own_redis, signups, sign_forms, status, words
):
    """With Redis away there is no key to look a token up by: the token must prove by
    itself that it was issued (its MAC). Three strings the server never issued place
    nothing; each gets the form again with its input, as an expired form does (with a
    fresh signed token when the app signs forms)."""
    app = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=True,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=sign_forms,
    )
    once_forms = OnceForms(app.test_client())
    page = once_forms.open("/signup")
    own_redis.stop()
    for n in range(3):
        sent = {**ADA, "email": f"made-up-{n}@example.com", "form_token": made_up()}
        answer = page.submit(sent)
        assert answer.status_code == status and words in answer.text, answer.text[:300]
        assert f'value="made-up-{n}@example.com"' in answer.text
        assert 'value="Ada Lovelace"' in answer.text and "Traceback" not in answer.text
        fresh = once_forms.page("/signup", answer.text).token
        assert fresh.startswith("s1.") if sign_forms else fresh == sent["form_token"]
    assert signups() == []


def test_a_form_drawn_before_the_outage_places_once_in_a_storm_that_made_up_tokens_join(
    make_app, own_redis, signups
):
    """Twenty concurrent submits of a form drawn before Redis went away (a storm of
    retries), and five made-up tokens sent with them: the form's token places one row and
    every duplicate lands on it; the made-up ones place nothing."""
    app = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=True,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
    )
    once_forms = OnceForms(app.test_client())
    page = once_forms.open("/signup")
    own_redis.stop()
    forged = [
        {**ADA, "email": f"made-up-{n}@example.com", "form_token": made_up()} for n in range(5)
    ]
    answers = page.submit_concurrently([ADA] * 20 + forged)
    genuine, refused = answers[:20], answers[20:]
    assert {(a.status_code, a.headers.get("Location")) for a in genuine} == {(303, "/thanks/1")}
    assert [a.status_code for a in refused] == [409] * 5
    assert signups() == ["ada@example.com"]


def test_redis_away_when_a_lost_session_needs_a_fresh_form_keeps_the_input(
    once_forms, own_redis, signups
):
    """No fresh token can be had for the new session: the form comes back (503) with the
    input and the token it came with; once Redis is back, that one is told it expired
    (it was bound to the lost session) with a fresh token, whose submit lands."""
    page = once_forms.open("/signup")
    once_forms.client.delete_cookie("session")
    own_redis.stop()
    away = page.submit(ADA)
    kept(away, 503, "could not reach our systems")
    assert once_forms.page("/signup", away.text).token == page.token
    own_redis.start()
    expired = once_forms.page("/signup", away.text).submit(ADA)
    kept(expired, 409, "had expired or was already used")
    assert once_forms.page("/signup", expired.text).submit(ADA).status_code == 303
    assert signups() == ["ada@example.com"]


@pytest.mark.parametrize("where", ["form", "api"])
def test_redis_away_at_submit_is_logged_once_with_its_cause_and_told_as_an_outcome(
    app, once_forms, own_redis, caplog, where
):
    """Every 503 says why, once, at WARNING (never the token), and its receivers of
    ``submit_decided`` hear of it as of every other outcome."""
    page = once_forms.open("/signup")
    own_redis.stop()
    decided = []
    with (
        caplog.at_level(logging.WARNING, logger="flask_submit_once"),
        signals.submit_decided.connected_to(
            lambda sender, outcome, **extra: decided.append(outcome), sender=app
        ),
    ):
        if where == "form":
            away = page.submit(ADA)
        else:
            away = once_forms.client.post(
                "/api/signups", json={"email": ADA["email"]}, headers={"Idempotency-Key": "k-1"}
            )
    assert away.status_code == 503
    (outcome,) = decided
    assert outcome.kind == "unavailable" and isinstance(outcome.error, redis.ConnectionError)
    (said,) = [record for record in caplog.records if record.name == "flask_submit_once"]
    assert said.levelno == logging.WARNING
    assert "answered 503 (unavailable): ConnectionError: " in said.getMessage()
    assert f":{own_redis.port}" in said.getMessage()
    assert page.token not in caplog.text


def test_redis_away_when_a_form_is_opened_is_logged_once_with_its_cause(client, own_redis, caplog):
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="flask_submit_once"):
        assert client.get("/signup").status_code == 503
    (said,) = [record for record in caplog.records if record.name == "flask_submit_once"]
    assert said.levelno == logging.WARNING
    assert "answered 503 (unavailable): ConnectionError: " in said.getMessage()
