"""The example app in examples/newsletter, which README.md quotes, really works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text

from examples.newsletter.app import create_app
from tests.conftest import hidden

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


def test_readme_quotes_the_example_verbatim():
    readme = (ROOT / "README.md").read_text()
    quoted = re.search(r"<!-- example: examples/newsletter/app.py -->\n```python\n(.*?)```",
                       readme, re.S)
    assert quoted, "README.md lost its copy of the example"
    assert quoted.group(1) == (ROOT / "examples/newsletter/app.py").read_text()
