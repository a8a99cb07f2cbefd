"""A form protected with ``form_tokens.form(...)``: every outcome, as a plain POST,
htmx and fetch see it, on a real Redis and PostgreSQL (scenarios of the user)."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import func, select

import signup_app
from submit_once import FormTokens
from submit_once.testing import OnceForms, hidden_value
from tests_support import Signup, free_port

ADA, GRACE = {"email": "ada@example.com"}, {"email": "grace@example.com"}
HTMX = {"HX-Request": "true"}


@pytest.fixture
def app(redis_url, sessions, rdb):
    app = signup_app.create_app(redis_url, sessions, WTF_CSRF_ENABLED=False)
    yield app
    FormTokens.state(app).store.client.close()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def signups(sessions):
    def count() -> int:
        with sessions() as db:
            return db.scalar(select(func.count()).select_from(Signup))
    return count


def emails(sessions) -> list[str]:
    with sessions() as db:
        return list(db.scalars(select(Signup.email).order_by(Signup.id)))


def test_a_double_click_signs_up_once_and_both_land_on_it(once_forms, signups):
    page = once_forms.open("/signup")
    first, second = page.submit_twice(ADA)
    assert (first.status_code, second.status_code) == (303, 303)
    once_forms.assert_once([first, second], rows=signups)


def test_back_edit_resubmit_is_told_with_the_new_input_and_places_nothing(once_forms, sessions):
    page = once_forms.open("/signup")
    placed = page.submit(ADA)
    again = page.submit(GRACE)  # Back, change the address, submit the same rendering
    assert again.status_code == 409
    assert 'value="grace@example.com"' in again.text and "already used" in again.text
    assert placed.headers["Location"] in again.text  # a link to what was sent first
    fresh = hidden_value(again.text, "form_token")
    assert fresh and fresh != page.token and emails(sessions) == ["ada@example.com"]
    # Only the user's own submit of that form places the second one.
    assert once_forms.page("/signup", again.text).submit(GRACE).status_code == 303
    assert emails(sessions) == ["ada@example.com", "grace@example.com"]


def test_two_versions_of_one_rendering_at_once_place_one_and_the_other_is_told(
        once_forms, sessions):
    page = once_forms.open("/signup")
    versions = [ADA, GRACE] * 4
    answers = page.submit_concurrently(versions)
    (placed,) = emails(sessions)
    for version, answer in zip(versions, answers, strict=True):
        if version["email"] == placed:
            assert answer.status_code == 303
        else:
            assert answer.status_code == 409 and f'value="{version["email"]}"' in answer.text
    assert len({a.headers["Location"] for a in answers if a.status_code == 303}) == 1


def test_invalid_fields_keep_the_token_and_the_input(once_forms, signups):
    page = once_forms.open("/signup")
    wrong = page.submit({"email": "not-an-address"})
    assert wrong.status_code == 422 and 'value="not-an-address"' in wrong.text
    assert hidden_value(wrong.text, "form_token") == page.token
    assert page.submit(ADA).status_code == 303 and signups() == 1


def test_an_expired_token_gets_the_input_back_with_a_fresh_token(once_forms, rdb, signups):
    page = once_forms.open("/signup")
    rdb.flushall()  # the token's TTL ran out
    answer = page.submit(ADA)
    assert answer.status_code == 409 and 'value="ada@example.com"' in answer.text
    assert hidden_value(answer.text, "form_token") not in (None, page.token)
    assert signups() == 0


def test_htmx_success_redirects_the_page_and_errors_swap_a_fragment(once_forms, signups):
    page = once_forms.open("/signup")
    wrong = page.submit({"email": "nope"}, headers=HTMX)
    assert wrong.status_code == 422 and "<html>" not in wrong.text and "<form" in wrong.text
    assert hidden_value(wrong.text, "form_token") == page.token
    done = page.submit(ADA, headers=HTMX)
    assert done.status_code == 200 and done.headers["HX-Redirect"].startswith("/thanks/")
    repeat = page.submit(ADA, headers=HTMX)
    assert repeat.headers["HX-Redirect"] == done.headers["HX-Redirect"] and signups() == 1
    changed = page.submit(GRACE, headers=HTMX)
    assert changed.status_code == 409 and "<html>" not in changed.text
    assert hidden_value(changed.text, "form_token") not in (None, page.token)


def test_requests_inside_one_app_context_each_get_their_own_answer(app, client, once_forms,
                                                                  sessions):
    """A suite that holds ``app.app_context()`` around its requests (Flask then reuses
    that context, and its ``g``, for each of them): an htmx submit, then a changed one
    as JSON, are each answered as what they are, and the change is seen."""
    page = once_forms.open("/signup")
    with app.app_context():
        done = client.post("/signup", data={**ADA, "form_token": page.token}, headers=HTMX)
        changed = client.post("/signup", json={**GRACE, "form_token": page.token})
    assert done.status_code == 200 and "HX-Redirect" in done.headers
    assert changed.status_code == 409 and changed.mimetype == "application/problem+json"
    assert emails(sessions) == ["ada@example.com"]


def test_fetch_sends_the_token_in_a_header_or_the_json_body_and_gets_json(client, once_forms,
                                                                         signups):
    page = once_forms.open("/signup")
    first = client.post("/signup", json=ADA, headers={"X-Form-Token": page.token})
    second = client.post("/signup", json={**ADA, "form_token": page.token})
    assert (first.status_code, first.json["status"]) == (201, "created")
    assert (second.status_code, second.json["status"]) == (200, "duplicate")
    assert first.headers["Location"] == second.json["location"] and signups() == 1
    changed = client.post("/signup", json=GRACE, headers={"X-Form-Token": page.token})
    assert changed.status_code == 409 and changed.mimetype == "application/problem+json"
    assert changed.json["existing"] == first.headers["Location"]
    retry = client.post("/signup", json=GRACE,
                        headers={"X-Form-Token": changed.json["form_token"]})
    assert retry.status_code == 201 and signups() == 2


def test_a_token_missing_or_malformed_is_a_400_and_touches_nothing(client, signups):
    assert client.post("/signup", data={**ADA, "form_token": "x" * 10}).status_code == 400
    assert client.post("/signup", json=ADA).status_code == 400
    assert signups() == 0


def test_one_rendering_issues_every_form_of_the_page_in_one_round_trip(client, redis_url):
    client.get("/signup")  # the app's connection is open from here on
    ender = redis.Redis.from_url(redis_url, decode_responses=True)
    ender.ping()  # connected before the watch, so its HELLO is not counted
    with redis.Redis.from_url(redis_url, decode_responses=True) as watcher, \
            watcher.monitor() as monitor:
        page = client.get("/signup")
        ender.echo("done")  # ends the watch
        sent = []
        while (command := monitor.next_command())["command"] != "ECHO done":
            if command["client_type"] != "lua":  # commands a script runs are not round trips
                sent.append(command["command"].split()[0])
    ender.close()
    assert sent == ["EVALSHA"]  # both tokens and both counts in one command
    assert page.text.count('name="form_token"') == 2


def test_with_redis_away_the_page_says_so_once_and_a_submit_keeps_its_input(redis_url, sessions):
    app = signup_app.create_app(f"redis://127.0.0.1:{free_port()}/0", sessions,
                                WTF_CSRF_ENABLED=False)
    client = app.test_client()
    page = client.get("/signup")  # two forms, one round trip: one 503 for the page
    assert page.status_code == 503 and page.text.count("could not reach") == 1
    answer = client.post("/signup", data={**ADA, "form_token": "t" * 43})
    assert answer.status_code == 503 and 'value="ada@example.com"' in answer.text
    assert hidden_value(answer.text, "form_token") == "t" * 43  # the same token, still good
    FormTokens.state(app).store.client.close()


def test_a_lost_session_cookie_keeps_the_input_with_fresh_tokens(redis_url, sessions, rdb):
    """With CSRFProtect on, a submit whose session cookie is gone fails Flask-WTF's check
    before the view: OnceForm.recover answers it with the form, not a bare 400."""
    app = signup_app.create_app(redis_url, sessions)
    browser = app.test_client()
    page = OnceForms(browser).open("/signup")
    browser.delete_cookie(app.config["SESSION_COOKIE_NAME"])
    answer = page.submit(ADA)
    assert answer.status_code == 400 and 'value="ada@example.com"' in answer.text
    assert "session had expired" in answer.text
    again = OnceForms(browser).page("/signup", answer.text)
    assert again.token not in (None, page.token) and again.hidden.get("csrf_token")
    assert again.submit(ADA).status_code == 303
    FormTokens.state(app).store.client.close()


def test_redis_failing_mid_page_never_raises_for_the_other_forms(redis_url, sessions, rdb):
    """The failed submit of one form keeps its input whatever the page's other form
    can get: Redis goes away between the submit and the re-render."""
    app = signup_app.create_app(redis_url, sessions, WTF_CSRF_ENABLED=False)
    page = OnceForms(app.test_client()).open("/signup")
    FormTokens.state(app).store.client = redis.Redis(port=free_port())
    answer = page.submit({"email": "nope"})
    assert answer.status_code == 422 and 'value="nope"' in answer.text
    assert hidden_value(answer.text, "form_token") == page.token
    assert answer.text.count('name="form_token"') == 1  # the other form got none


def test_a_json_validation_error_names_the_fields(client, once_forms):
    page = once_forms.open("/signup")
    answer = client.post("/signup", json={"email": "nope"}, headers={"X-Form-Token": page.token})
    assert answer.status_code == 422 and answer.json["form_token"] == page.token
    assert list(answer.json["errors"]) == ["email"]


def test_the_same_values_as_json_and_as_a_form_are_the_same_submission(client, once_forms):
    page = once_forms.open("/signup")
    assert client.post("/signup", json=ADA, headers={"X-Form-Token": page.token}).status_code \
        == 201
    assert page.submit(ADA).status_code == 303  # a repeat, not "changed"


def test_a_form_that_needs_a_fresh_token_while_redis_is_away_keeps_its_input(
        app, once_forms, sessions):
    """Back + edit + resubmit (a fresh token is due) just as Redis goes away: the input
    comes back with the token it was sent with, never a page that drops it."""
    page = once_forms.open("/signup")
    page.submit(ADA)
    FormTokens.state(app).store.client = redis.Redis(port=free_port())
    answer = page.submit(GRACE, headers=HTMX)
    assert answer.status_code == 503 and 'value="grace@example.com"' in answer.text
    assert "<html>" not in answer.text and hidden_value(answer.text, "form_token") == page.token
    assert emails(sessions) == ["ada@example.com"]


def test_back_can_show_the_rendered_form_as_it_was(client, app):
    """A GET of the form is private, no-cache and does not vary on the cookie it just
    set: the browser may show it again on Back with its (spent) token, so the resubmit
    lands on the result instead of a fresh token making a second one."""
    page = client.get("/signup")
    assert page.headers["Cache-Control"] == "private, no-cache"
    assert "Set-Cookie" in page.headers and "Cookie" not in page.headers.get("Vary", "")
    answer = client.post("/signup", data={"email": "nope",  # any other page keeps its Vary
                                          "form_token": hidden_value(page.text, "form_token")})
    assert answer.status_code == 422 and "Cookie" in answer.headers.get("Vary", "")


def test_a_session_interface_the_app_chose_is_left_alone(redis_url):
    from flask import Flask
    from flask.sessions import SecureCookieSessionInterface

    class Own(SecureCookieSessionInterface):
        pass

    app = Flask(__name__)
    app.config.update(SECRET_KEY="s", REDIS_URL=redis_url)
    app.session_interface = Own()
    FormTokens(app)
    assert type(app.session_interface) is Own
    FormTokens.state(app).store.client.close()
