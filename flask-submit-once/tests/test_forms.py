"""A form protected with ``@submit_once.form``, sent as a plain POST (and by Turbo, which
wants the same answers): every outcome as the user meets it, on a real Redis and
PostgreSQL."""

from __future__ import annotations

import secrets

import pytest
import redis

from flask_submit_once.testing import OnceForms

ADA = {"email": "ada@example.com", "name": "Ada", "quantity": "2"}
GRACE = {**ADA, "email": "grace@example.com"}
TURBO = {"Accept": "text/vnd.turbo-stream.html, text/html, application/xhtml+xml"}


def rows(signups):
    return lambda: len(signups())


def test_a_double_click_signs_up_once_and_both_land_on_it(once_forms, signups):
    page = once_forms.open("/signup")
    first, second = page.submit_twice(ADA)
    assert (first.status_code, second.status_code) == (303, 303)
    assert once_forms.assert_once([first, second], rows=rows(signups)) == "/thanks/1"


def test_back_edit_resubmit_is_told_keeps_the_new_input_and_saves_nothing(once_forms, signups):
    page = once_forms.open("/signup")
    first = page.submit(ADA)
    # Back, change the address, submit the same rendering
    again = page.submit(GRACE)
    assert again.status_code == 409 and "already used, with other details" in again.text
    assert 'value="grace@example.com"' in again.text
    # what was sent first
    assert f'href="{first.headers["Location"]}"' in again.text
    fresh = once_forms.page("/signup", again.text)
    assert fresh.token not in (None, page.token) and signups() == ["ada@example.com"]
    # Only the user's own submit of the form shown again saves the new address.
    assert fresh.submit(GRACE).status_code == 303
    assert signups() == ["ada@example.com", "grace@example.com"]


def test_invalid_fields_keep_the_input_and_the_token_and_save_nothing(once_forms, signups):
    page = once_forms.open("/signup")
    invalid = page.submit({**ADA, "email": "not an address", "quantity": "11"})
    assert invalid.status_code == 422 and "need your attention" in invalid.text
    assert "email: Invalid email address." in invalid.text and "quantity:" in invalid.text
    assert 'value="not an address"' in invalid.text and 'value="11"' in invalid.text
    assert once_forms.page("/signup", invalid.text).token == page.token and signups() == []
    assert page.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]


@pytest.mark.parametrize("headers", [{}, TURBO], ids=["plain", "turbo"])
def test_a_form_whose_token_redis_lost_comes_back_with_the_input_and_a_fresh_token(
    once_forms, rdb, signups, headers
):
    page = once_forms.open("/signup")
    rdb.flushall()
    expired = page.submit(ADA, headers=headers)
    assert expired.status_code == 409 and "had expired or was already used" in expired.text
    assert 'value="ada@example.com"' in expired.text
    fresh = once_forms.page("/signup", expired.text)
    assert fresh.token != page.token and signups() == []
    assert fresh.submit(ADA, headers=headers).status_code == 303
    # The lost rendering sent once more: its address has signed up since (422).
    assert page.submit(ADA).status_code == 422 and signups() == ["ada@example.com"]


@pytest.mark.parametrize(
    "token",
    [None, "", "a" * 42, "a" * 44, "a" * 42 + "=", "é" * 43, "a" * 42 + "+", ["a" * 43, "b" * 43]],
    ids=["missing", "empty", "short", "long", "padding", "non-ascii", "plus", "twice"],
)
def test_a_token_missing_malformed_or_repeated_is_a_400_and_touches_nothing(
    once_forms, client, rdb, signups, token
):
    page = once_forms.open("/signup")
    keys = sorted(rdb.keys("*"))
    data = {**page.hidden, **ADA, **({} if token is None else {"form_token": token})}
    answer = client.post(page.url, data=data)
    assert answer.status_code == 400 and "without a valid form token" in answer.text
    assert sorted(rdb.keys("*")) == keys and signups() == []
    # the page's own token was not touched
    assert page.submit(ADA).status_code == 303


def test_a_made_up_token_is_expired_before_its_form_is_validated_or_redis_asked(
    make_app, own_redis, signups, monkeypatch
):
    """A validator may call elsewhere (a card check at a provider): a token the server
    never issued must cost nothing, so it is refused by its MAC before the form is
    validated and before any Redis command that could consume it."""
    from signup_app import SignUpForm

    validated = []
    validate = SignUpForm.validate
    monkeypatch.setattr(
        SignUpForm, "validate", lambda form, **kw: validated.append(1) or validate(form, **kw)
    )
    app = make_app(REDIS_URL=own_redis.url)
    once_forms = OnceForms(app.test_client())
    page = once_forms.open("/signup")
    with redis.Redis.from_url(own_redis.url, decode_responses=True) as rdb:
        keys = rdb.keys("so:*")

        def getdels() -> int:
            return int(rdb.info("commandstats").get("cmdstat_getdel", {}).get("calls", 0))

        before = getdels()
        answer = page.submit({**ADA, "form_token": secrets.token_urlsafe(32)})
        assert answer.status_code == 409 and 'value="ada@example.com"' in answer.text
        assert validated == [] and getdels() == before
        assert set(keys) <= set(rdb.keys("so:*"))
    assert page.submit(ADA).status_code == 303 and validated == [1]
    assert signups() == ["ada@example.com"]


def test_turbo_gets_a_303_to_the_result_and_a_422_page_for_invalid_fields(once_forms):
    page = once_forms.open("/signup")
    invalid = page.submit({**ADA, "email": ""}, headers=TURBO)
    assert invalid.status_code == 422 and invalid.mimetype == "text/html"
    # Turbo swaps the whole page it gets back
    assert "<html>" in invalid.text
    done = page.submit(ADA, headers=TURBO)
    assert done.status_code == 303 and done.headers["Location"] == "/thanks/1"
    assert page.submit(ADA, headers=TURBO).headers["Location"] == "/thanks/1"


def test_a_view_that_refuses_saves_nothing_and_says_why_with_a_fresh_token(
    app, once_forms, signups
):
    page = once_forms.open("/signup")
    # since the form was checked
    app.config["SIGNUPS_CLOSED"] = True
    refused = page.submit(ADA)
    assert refused.status_code == 409 and "Sign-ups closed a moment ago." in refused.text
    assert 'value="ada@example.com"' in refused.text and signups() == []
    fresh = once_forms.page("/signup", refused.text)
    assert fresh.token != page.token
    app.config["SIGNUPS_CLOSED"] = False
    assert fresh.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]


@pytest.mark.parametrize(
    "sent",
    [
        # the form strips it
        {"name": " Ada "},
        # what was sent first, see below
        {"name": "José"},
        # José in NFD: how some keyboards send it
        {"name": "Jose\u0301"},
        # an IntegerField stores 2
        {"quantity": "02"},
        {"quantity": " 2"},
    ],
    ids=["spaces", "same", "nfd", "leading-zero", "leading-space"],
)
def test_the_same_submission_sent_differently_is_a_repeat_not_a_change(once_forms, signups, sent):
    """What makes a submission is what the form stores, after its
    filters and coercion, so a resubmit that stores the same is not told "changed"."""
    page = once_forms.open("/signup")
    first = {**ADA, "name": "José"} if sent != {"name": " Ada "} else ADA
    assert page.submit(first).status_code == 303
    again = page.submit({**first, **sent})
    assert (again.status_code, again.headers.get("Location")) == (303, "/thanks/1")
    assert signups() == ["ada@example.com"]


def test_a_resubmit_that_stores_something_else_is_a_change(once_forms, signups):
    page = once_forms.open("/signup")
    page.submit({**ADA, "name": "José"})
    for other in ({"name": "Josée"}, {"quantity": "3"}):
        assert page.submit({**ADA, "name": "José", **other}).status_code == 409
    assert signups() == ["ada@example.com"]


def test_a_resubmit_invalid_now_because_its_own_submit_landed_is_that_repeat(
    make_app, once_forms, signups
):
    """The form says an address signs up once: after the first submit lands, the same
    rendering is invalid. Sent again (through another worker, which has not seen it
    land, or with spaces the form strips), it is answered as the repeat it is."""
    page = once_forms.open("/signup")
    assert page.submit(ADA).status_code == 303
    other_worker = make_app().test_client()
    for client, sent in ((other_worker, ADA), (None, {**ADA, "email": " ada@example.com"})):
        if client is not None:
            client.set_cookie("session", once_forms.client.get_cookie("session").value)
        again = page.submit(sent, client=client)
        assert (again.status_code, again.headers.get("Location")) == (303, "/thanks/1")
    # Another rendering with the same address is invalid: its submit never landed.
    other = once_forms.open("/signup").submit(ADA)
    assert other.status_code == 422 and "already signed up" in other.text
    assert signups() == ["ada@example.com"]


def test_a_page_with_a_form_is_shown_again_as_it_was_on_back_when_the_app_asks(make_app):
    client = make_app(SUBMIT_ONCE_BACK_SHOWS_FORM=True).test_client()
    page = client.get("/signup")
    assert page.headers["Cache-Control"] == "private, no-cache"
    # The page's first view had no cookie: Vary: Cookie would never match again.
    assert "Cookie" not in page.headers.get("Vary", "")
    assert client.get("/thanks/1").headers.get("Cache-Control") is None


def test_by_default_a_page_with_a_form_keeps_flasks_vary_cookie(client):
    """Dropping it takes replacing the app's session interface: only when asked."""
    page = client.get("/signup")
    assert page.headers["Cache-Control"] == "private, no-cache"
    assert "Cookie" in page.headers["Vary"]


def test_a_commit_nobody_can_confirm_keeps_the_input_and_the_token_which_settles_it(
    app, once_forms, engine, signups
):
    """The database connection dies inside the transaction, after the GETDEL: whether it
    committed is not known, so the token is put back, and resubmitting it lands once."""
    from flask_submit_once import signals
    from signup_app import submit_once

    def cut_the_connection(sender, **extra):
        pid = submit_once.session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")

    page = once_forms.open("/signup")
    with signals.token_consumed.connected_to(cut_the_connection, sender=app):
        lost = page.submit(ADA)
    assert lost.status_code == 503 and "could not confirm whether this was saved" in lost.text
    assert 'value="ada@example.com"' in lost.text and lost.headers["Retry-After"] == "5"
    assert once_forms.page("/signup", lost.text).token == page.token and signups() == []
    assert page.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]
