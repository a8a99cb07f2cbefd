"""The library's plain-POST example (flask-submit-once/examples/newsletter, which its
plain-forms guide shows) works on the shop's servers, through its public surface only."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from dev.embedded import EmbeddedRedis
from tests.conftest import hidden, lose_the_commit_reply

# in scripts/test --quick
pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "flask-submit-once/examples"
# the examples run from their folder: `newsletter.app`
sys.path.insert(0, str(EXAMPLES))
from newsletter.app import create_app, submit_once  # noqa: E402


@pytest.fixture
def newsletter(servers):
    app = create_app(
        {"SECRET_KEY": "test", "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis.url}
    )
    yield app.test_client()
    with app.test_request_context():
        submit_once.session.get_bind().dispose()
        submit_once.redis.close()
    with servers.engine.begin() as conn:
        conn.execute(text("DROP TABLE newsletter_subscriptions"))


def subscriptions(servers) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM newsletter_subscriptions"))


def open_form(newsletter, email: str = "reader@example.com") -> dict[str, str]:
    """GET the form; the fields a browser would send with ``email`` typed in."""
    html = newsletter.get("/").get_data(as_text=True)
    return {
        "email": email,
        "csrf_token": hidden(html, "csrf_token"),
        "form_token": hidden(html, "form_token"),
    }


def test_sending_the_sign_up_three_times_subscribes_once(newsletter, servers):
    data = open_form(newsletter)
    responses = [newsletter.post("/subscribe", data=data) for _ in range(3)]
    assert [r.status_code for r in responses] == [303, 303, 303]
    (location,) = {r.headers["Location"] for r in responses}
    assert re.fullmatch(r"/thanks/[\w-]{22}", location)
    assert "reader@example.com" in newsletter.get(location).get_data(as_text=True)
    assert subscriptions(servers) == 1


def test_back_edit_resubmit_is_told_keeps_the_new_address_and_subscribes_nothing(
    newsletter, servers
):
    data = open_form(newsletter)
    first = newsletter.post("/subscribe", data=data)
    # Back shows that very rendering (spent token included); the user edits it and submits.
    again = newsletter.post("/subscribe", data={**data, "email": "other@example.com"})
    page = again.get_data(as_text=True)
    assert (first.status_code, again.status_code) == (303, 409)
    assert "already used, with other details" in page and 'value="other@example.com"' in page
    # what was sent first
    assert f'href="{first.headers["Location"]}"' in page
    fresh = hidden(page, "form_token")
    assert fresh != data["form_token"] and subscriptions(servers) == 1
    # Submitting the form the 409 gave back is the user's own choice: it subscribes.
    second = newsletter.post(
        "/subscribe", data={**data, "email": "other@example.com", "form_token": fresh}
    )
    assert second.status_code == 303
    assert subscriptions(servers) == 2


def test_back_shows_the_form_as_rendered_from_the_browser_cache(newsletter):
    # the first visit: it sets the session cookie
    page = newsletter.get("/")
    assert page.headers["Cache-Control"] == "private, no-cache"
    # else Back would fetch a fresh form
    assert "Cookie" not in page.headers.get("Vary", "")
    # not the page's own URL
    assert 'action="/subscribe"' in page.get_data(as_text=True)


def test_a_lost_session_keeps_the_input_with_fresh_tokens(newsletter, servers):
    data = open_form(newsletter)
    lost = newsletter.post("/subscribe", data={**data, "csrf_token": "expired"})
    page = lost.get_data(as_text=True)
    assert lost.status_code == 400 and 'value="reader@example.com"' in page
    assert hidden(page, "form_token") != data["form_token"]
    retry = newsletter.post(
        "/subscribe",
        data={
            **data,
            "csrf_token": hidden(page, "csrf_token"),
            "form_token": hidden(page, "form_token"),
        },
    )
    assert retry.status_code == 303 and subscriptions(servers) == 1


def test_a_typo_keeps_the_token_and_the_fix_subscribes(newsletter, servers):
    data = open_form(newsletter, "reader@")
    again = newsletter.post("/subscribe", data=data)
    assert again.status_code == 422
    assert hidden(again.get_data(as_text=True), "form_token") == data["form_token"]
    fixed = newsletter.post("/subscribe", data={**data, "email": "reader@example.com"})
    assert fixed.status_code == 303
    assert subscriptions(servers) == 1


def test_the_plain_forms_guide_shows_the_example_from_the_file_itself():
    """Included by Sphinx (literalinclude), not pasted: the page cannot drift from it."""
    doc = ROOT / "flask-submit-once/docs/plain.md"
    included = re.findall(r"```\{literalinclude\} (\S+)", doc.read_text())
    assert EXAMPLES / "newsletter/app.py" in {(doc.parent / path).resolve() for path in included}


def test_the_example_imports_only_flask_submit_once_of_this_repository():
    source = (EXAMPLES / "newsletter/app.py").read_text()
    ours = set(re.findall(r"^(?:from|import) (\w+)", source, re.M)) & {
        "flask_submit_once",
        "submit_once",
        "webapp",
        "dev",
        "tests",
    }
    assert ours == {"flask_submit_once"}


def test_redis_unreachable_before_the_token_is_spent_keeps_the_input_and_the_token(
    servers, tmp_path
):
    # stopped, then back
    own = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    app = create_app(
        {"SECRET_KEY": "test", "DATABASE_URL": servers.database_url, "REDIS_URL": own.url}
    )
    newsletter = app.test_client()
    try:
        data = open_form(newsletter)
        own.stop()
        away = newsletter.post("/subscribe", data=data)
        # no token for a new form: the library's 503 page
        again = newsletter.get("/")
        own.start()
        page = away.get_data(as_text=True)
        assert again.status_code == 503 and "could not reach" in again.get_data(as_text=True)
        assert away.status_code == 503 and "nothing was saved" in page
        assert hidden(page, "form_token") == data["form_token"]
        assert 'value="reader@example.com"' in page
        # the same token, Redis back
        later = newsletter.post("/subscribe", data=data)
        assert later.status_code == 303 and subscriptions(servers) == 1
    finally:
        with app.test_request_context():
            submit_once.session.get_bind().dispose()
            submit_once.redis.close()
        own.kill()
        with servers.engine.begin() as conn:
            conn.execute(text("DROP TABLE newsletter_subscriptions"))


@pytest.mark.parametrize("committed", [True, False], ids=["commit-landed", "commit-lost"])
def test_a_commit_that_lost_its_answer_keeps_the_token_and_the_resubmit_settles_it(
    newsletter, servers, monkeypatch, committed
):
    data = open_form(newsletter)
    lose_the_commit_reply(monkeypatch, committed=committed)
    unsure = newsletter.post("/subscribe", data=data)
    assert unsure.status_code == 503 and "could not confirm" in unsure.get_data(as_text=True)
    assert hidden(unsure.get_data(as_text=True), "form_token") == data["form_token"]
    assert newsletter.post("/subscribe", data=data).status_code == 303
    assert subscriptions(servers) == 1
