"""Forms drawn while Redis is away (``SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS``): the form is
still shown, with a token signed with the app's key, whose submit the lock and the UNIQUE
column decide while Redis is away, and that still submits once when it is back. A signed
token is good for its own session, form and TTL only; the form limits hold, counted in
the process. These tests stop and start a Redis of their own (``own_redis``)."""

from __future__ import annotations

import pytest
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import func, select

from flask_submit_once.testing import OnceForms
from signup_app import Comment, submit_once

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}
HELLO = {"text": "Hello"}


@pytest.fixture
def app(make_app, own_redis):
    return make_app(REDIS_URL=own_redis.url, SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True)


def degraded(app) -> bool:
    with app.app_context():
        return submit_once.degraded


def another_worker(make_app, once_forms, url: str):
    """The same browser, answered by another process of the app (nothing remembered)."""
    client = make_app(REDIS_URL=url, SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True).test_client()
    client.set_cookie("session", once_forms.client.get_cookie("session").value)
    return client


def comments(sessions) -> int:
    with sessions() as db:
        return int(db.scalar(select(func.count()).select_from(Comment)))


def kept(answer, status: int, words: str, sent: dict[str, str]) -> None:
    assert answer.status_code == status and words in answer.text, answer.text[:300]
    for value in sent.values():
        assert value in answer.text
    assert "Traceback" not in answer.text


def test_redis_away_at_render_draws_every_form_with_a_signed_token(app, client, own_redis):
    own_redis.stop()
    page = client.get("/signup")
    assert page.status_code == 200 and degraded(app)
    forms = [OnceForms(client).page("/signup", page.text, form=n).token for n in (0, 1)]
    assert all(token.startswith("s1.") for token in forms) and len(set(forms)) == 2
    # Back shows it as it was
    assert page.headers["Cache-Control"] == "private, no-cache"


def test_a_storm_while_redis_is_away_makes_one_row_and_the_token_still_lands_on_it_after(
    app, make_app, once_forms, own_redis, sessions, signups
):
    """Ten submits at once of one rendering (a double click and retries), all while Redis
    is away: the lock and the UNIQUE column make one comment. Redis back, never having
    seen the token: the same token (another worker, nothing remembered) lands on it; a
    form drawn in the outage and sent only now signs up once; new pages get Redis tokens."""
    own_redis.stop()
    page = once_forms.open("/signup", form=1)
    unsent = once_forms.open("/signup")
    answers = page.submit_concurrently([HELLO] * 10)
    assert {(a.status_code, a.headers.get("Location")) for a in answers} == {(303, "/comments/1")}
    assert comments(sessions) == 1
    own_redis.start()
    for client in (another_worker(make_app, once_forms, own_redis.url), None):
        again = page.submit(HELLO, client=client)
        assert (again.status_code, again.headers.get("Location")) == (303, "/comments/1")
    assert comments(sessions) == 1
    assert unsent.submit(ADA).headers["Location"] == "/thanks/1"
    assert unsent.submit(ADA).headers["Location"] == "/thanks/1"
    assert signups() == ["ada@example.com"]
    # until a page is drawn with Redis
    assert degraded(app)
    fresh = once_forms.open("/signup", form=1)
    assert not fresh.token.startswith("s1.") and not degraded(app)
    assert fresh.submit(HELLO).status_code == 303 and comments(sessions) == 2


@pytest.mark.parametrize("redis_back", [False, True], ids=["redis-away", "redis-back"])
def test_a_signed_token_is_expired_in_another_session_or_form_and_the_owners_still_works(
    app, once_forms, own_redis, signups, redis_back
):
    own_redis.stop()
    page = once_forms.open("/signup")
    # another browser
    stranger = OnceForms(app.test_client()).open("/signup")
    if redis_back:
        own_redis.start()
    theirs = stranger.submit({**ADA, "form_token": page.token})
    kept(theirs, 409, "had expired or was already used", ADA)
    assert stranger.forms.page("/signup", theirs.text).token not in (None, page.token)
    # the sign-up token, sent as a comment's
    elsewhere = page.submit(HELLO, to="/comments")
    kept(elsewhere, 409, "had expired or was already used", HELLO)
    assert signups() == []
    assert page.submit(ADA).headers["Location"] == "/thanks/1"
    assert signups() == ["ada@example.com"]


def tampered(token: str, where: str) -> str:
    """``token`` with one character changed: in its payload, or in its signature."""
    at = 10 if where == "payload" else len(token) - 5
    return token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]


@pytest.mark.parametrize("how", ["payload", "signature", "other-key"])
def test_a_signed_token_tampered_with_or_signed_by_another_key_is_a_400(
    app, make_app, once_forms, own_redis, signups, how
):
    own_redis.stop()
    page = once_forms.open("/signup")
    if how == "other-key":
        other = make_app(
            REDIS_URL=own_redis.url,
            SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
            SECRET_KEY="another app's key",
        )
        forged = OnceForms(other.test_client()).open("/signup").token
    else:
        forged = tampered(page.token, how)
    assert forged.startswith("s1.") and forged != page.token
    answer = page.submit({**ADA, "form_token": forged})
    assert answer.status_code == 400 and "without a valid form token" in answer.text
    assert "ada@example.com" not in answer.text and signups() == []
    assert page.submit(ADA).headers["Location"] == "/thanks/1"


@pytest.mark.parametrize("age", [-1, +1], ids=["just-inside", "just-over"])
def test_a_signed_token_older_than_the_ttl_is_expired_with_the_input_kept(
    make_app, own_redis, signups, stopped_clock, age
):
    """The signed issue time is the only clock a signed token has. (Flask-WTF's own time
    limit is off here: by default it is the TTL too, and a page that old would be told
    its session expired, input kept, before its form token is even read.)"""
    app = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
        SUBMIT_ONCE_TTL_SECONDS=600,
        WTF_CSRF_TIME_LIMIT=None,
    )
    once_forms = OnceForms(app.test_client())
    own_redis.stop()
    # Stopped, so the token is drawn at second 0 exactly (read after drawing, a clock on a
    # loaded machine could be a second on, and "just inside" past the TTL).
    stopped_clock(0)
    page = once_forms.open("/signup")
    stopped_clock(600 + age)
    answer = page.submit(ADA)
    if age < 0:
        assert answer.headers["Location"] == "/thanks/1" and signups() == ["ada@example.com"]
        return
    kept(answer, 409, "had expired or was already used", ADA)
    fresh = once_forms.page("/signup", answer.text)
    assert fresh.token.startswith("s1.") and fresh.token != page.token and signups() == []
    assert fresh.submit(ADA).headers["Location"] == "/thanks/1"


def nonce_of(token: str) -> str:
    """A signed token's nonce: its payload is signed, not encrypted, so anyone reads it."""
    _, (nonce, _) = URLSafeTimedSerializer("not the key").loads_unsafe(token[len("s1.") :])
    return str(nonce)


@pytest.mark.parametrize("age", [0, 601], ids=["fresh", "past-the-ttl"])
def test_a_signed_tokens_nonce_sent_bare_is_expired_and_places_nothing(
    make_app, own_redis, signups, stopped_clock, age
):
    """A signed token's parts cannot be sent apart: its nonce, read from the payload and
    sent as a token of its own, is no token the server issued (and would skip the signed
    token's expiry). With the fallback on and Redis away it places nothing, fresh or past
    the TTL; the signed token itself is expired past the TTL."""
    app = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
        SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=True,
        SUBMIT_ONCE_TTL_SECONDS=600,
        WTF_CSRF_TIME_LIMIT=None,
    )
    once_forms = OnceForms(app.test_client())
    own_redis.stop()
    stopped_clock(0)
    page = once_forms.open("/signup")
    assert page.token.startswith("s1.")
    stopped_clock(age)
    bare = page.submit({**ADA, "form_token": nonce_of(page.token)})
    kept(bare, 409, "had expired or was already used", ADA)
    assert signups() == []
    signed = page.submit(ADA)
    if age:
        kept(signed, 409, "had expired or was already used", ADA)
        assert signups() == []
    else:
        assert signed.headers["Location"] == "/thanks/1" and signups() == ["ada@example.com"]


def until_refused(open_page, most: int) -> list[int]:
    statuses: list[int] = []
    while len(statuses) < most and 429 not in statuses:
        statuses.append(open_page())
    return statuses


def test_the_form_limits_hold_while_redis_is_away_counted_in_the_process(make_app, own_redis):
    """The caps count in windows of the clock, so the pages are opened until well past
    twice the cap (as in test_limits.py)."""
    per_session = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
        SUBMIT_ONCE_MAX_FORMS_PER_SESSION=6,
        # two pages of three forms
    )
    per_client = make_app(
        REDIS_URL=own_redis.url,
        SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=True,
        SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=6,
    )
    own_redis.stop()
    browser = per_session.test_client()
    refused = []

    def open_page() -> int:
        refused.append(browser.get("/signup"))
        return refused[-1].status_code

    assert until_refused(open_page, most=6)[-1] == 429
    assert "very many times" in refused[-1].text and 0 < int(refused[-1].headers["Retry-After"])

    # no cookie kept: a new session every time
    def opens(address: str) -> int:
        return (
            per_client.test_client()
            .get("/signup", environ_base={"REMOTE_ADDR": address})
            .status_code
        )

    assert until_refused(lambda: opens("192.0.2.1"), most=5)[-1] == 429
    assert opens("192.0.2.2") == 200


def test_off_by_default_redis_away_at_render_is_a_503_that_says_when_to_retry(make_app, own_redis):
    app = make_app(REDIS_URL=own_redis.url)
    own_redis.stop()
    away = app.test_client().get("/signup")
    assert away.status_code == 503 and away.headers["Retry-After"] == "5"
    assert "could not reach our systems" in away.text and not degraded(app)
