"""The example app in examples/newsletter, which docs/PATTERN.md quotes, really works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from sqlalchemy import text

from dev.embedded import free_port
from examples.newsletter.app import create_app
from tests.conftest import hidden, lose_the_commit_reply

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def newsletter(servers):
    app = create_app({"SECRET_KEY": "test", "DATABASE_URL": servers.database_url,
                      "FORM_TOKENS_REDIS_URL": servers.redis.url})
    yield app.test_client()
    app.extensions["newsletter_db"].kw["bind"].dispose()
    with servers.engine.begin() as conn:
        conn.execute(text("DROP TABLE newsletter_subscriptions"))
    app.extensions["form_tokens"].store.client.close()


def subscriptions(servers) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM newsletter_subscriptions"))


def test_sending_the_sign_up_three_times_subscribes_once(newsletter, servers):
    html = newsletter.get("/").get_data(as_text=True)
    data = {"email": "reader@example.com", "csrf_token": hidden(html, "csrf_token"),
            "form_token": hidden(html, "form_token")}
    responses = [newsletter.post("/", data=data) for _ in range(3)]
    assert [r.status_code for r in responses] == [303, 303, 303]
    assert {r.headers["Location"] for r in responses} == {"/thanks"}
    assert subscriptions(servers) == 1


def test_a_typo_keeps_the_token_and_the_fix_subscribes(newsletter, servers):
    html = newsletter.get("/").get_data(as_text=True)
    data = {"email": "reader@", "csrf_token": hidden(html, "csrf_token"),
            "form_token": hidden(html, "form_token")}
    again = newsletter.post("/", data=data)
    assert again.status_code == 422
    assert hidden(again.get_data(as_text=True), "form_token") == data["form_token"]
    assert newsletter.post("/", data={**data, "email": "reader@example.com"}).status_code == 303
    assert subscriptions(servers) == 1


def test_pattern_doc_quotes_the_example_verbatim():
    doc = (ROOT / "docs/PATTERN.md").read_text()
    quoted = re.search(r"<!-- example: examples/newsletter/app.py -->\n```python\n(.*?)```",
                       doc, re.S)
    assert quoted, "docs/PATTERN.md lost its copy of the example"
    assert quoted.group(1) == (ROOT / "examples/newsletter/app.py").read_text()


def test_the_example_imports_only_submit_once_of_this_repository():
    source = (ROOT / "examples/newsletter/app.py").read_text()
    ours = set(re.findall(r"^(?:from|import) (submit_once|webapp|dev|tests)\b", source, re.M))
    assert ours == {"submit_once"}


def test_redis_unreachable_before_the_token_is_spent_keeps_the_input_and_the_token(
        newsletter, servers):
    html = newsletter.get("/").get_data(as_text=True)
    data = {"email": "reader@example.com", "csrf_token": hidden(html, "csrf_token"),
            "form_token": hidden(html, "form_token")}
    store = newsletter.application.extensions["form_tokens"].store
    working, store.client = store.client, redis.Redis(port=free_port())  # nothing listens
    try:
        away = newsletter.post("/", data=data)
        assert newsletter.get("/").status_code == 503  # no token to issue: a plain 503
    finally:
        store.client.close()
        store.client = working
    page = away.get_data(as_text=True)
    assert away.status_code == 503 and "nothing was saved" in page
    assert hidden(page, "form_token") == data["form_token"]
    assert 'value="reader@example.com"' in page
    assert newsletter.post("/", data=data).status_code == 303  # the same token, later
    assert subscriptions(servers) == 1


@pytest.mark.parametrize("committed", [True, False], ids=["commit-landed", "commit-lost"])
def test_a_commit_that_lost_its_answer_keeps_the_token_and_the_resubmit_settles_it(
        newsletter, servers, monkeypatch, committed):
    html = newsletter.get("/").get_data(as_text=True)
    data = {"email": "reader@example.com", "csrf_token": hidden(html, "csrf_token"),
            "form_token": hidden(html, "form_token")}
    lose_the_commit_reply(monkeypatch, committed=committed)
    unsure = newsletter.post("/", data=data)
    assert unsure.status_code == 503 and "could not confirm" in unsure.get_data(as_text=True)
    assert hidden(unsure.get_data(as_text=True), "form_token") == data["form_token"]
    assert newsletter.post("/", data=data).status_code == 303
    assert subscriptions(servers) == 1
