"""Where a submit's answer shows: on a page of several forms, with the one form it answers
(``submit_once.answered``); in a form its ``context`` draws; in the JSON a script gets
for a lost session, which carries what it needs to resubmit. And a ``done`` whose URL the
rows cannot fill stops every submit before its token is spent."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import sessionmaker

import ratings_app
from flask_submit_once.testing import OnceForms

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}


@pytest.fixture(scope="module")
def tables(engine: Engine) -> Iterator[Engine]:
    ratings_app.Base.metadata.drop_all(engine)
    ratings_app.Base.metadata.create_all(engine)
    yield engine
    ratings_app.Base.metadata.drop_all(engine)


@pytest.fixture
def make_ratings(tables, redis_url, rdb):
    """``make_ratings(**how)``: the ratings app (ratings_app.py) on empty tables."""
    with tables.begin() as conn:
        conn.execute(text("TRUNCATE ratings, suggestions RESTART IDENTITY"))
    apps = []

    def make(**how):
        apps.append(ratings_app.create_app(sessionmaker(tables), REDIS_URL=redis_url, **how))
        return apps[-1]

    yield make
    for app in apps:
        with app.app_context():
            ratings_app.submit_once.redis.close()


@pytest.fixture
def forms(make_ratings) -> OnceForms:
    return OnceForms(make_ratings().test_client())


@pytest.fixture
def saved(tables):
    """``saved(model)``: what every row of ``model`` holds, in order (its last column)."""

    def rows(model):
        column = getattr(model, {"Rating": "stars", "Suggestion": "title"}[model.__name__])
        with tables.connect() as conn:
            return list(conn.execute(select(column).order_by(model.id)).scalars())

    return rows


def token_keys(rdb) -> list[str]:
    return sorted(key for key in rdb.keys("so:*") if not key.startswith("so:issued:"))


@pytest.mark.parametrize(
    "item, sent, status, words",
    [
        (2, {"stars": "9"}, 422, "need your attention"),
        (1, {"stars": "4"}, 409, "had expired or was already used"),
    ],
    ids=["invalid-second", "expired-first"],
)
def test_on_a_page_of_two_forms_of_one_endpoint_the_answer_shows_with_its_own_form(
    forms, rdb, saved, item, sent, status, words
):
    page = forms.open("/items", form=item - 1)
    if status == 409:
        rdb.flushall()
    answer = page.submit(sent)
    assert answer.status_code == status
    drawn = dict(
        zip((1, 2), re.findall(r"<form\b.*?</form>", answer.text, flags=re.S), strict=True)
    )
    assert words in drawn[item] and f'value="{sent["stars"]}"' in drawn[item]
    other = 3 - item
    assert 'role="alert"' not in drawn[other] and f'value="{sent["stars"]}"' not in drawn[other]
    again, beside = (forms.page("/items", answer.text, form=n - 1) for n in (item, other))
    assert (again.token == page.token) == (status == 422)
    assert beside.token not in (None, page.token, again.token)
    assert beside.submit({"stars": "5"}).headers["Location"] == "/ratings/1"
    assert saved(ratings_app.Rating) == [5]


@pytest.mark.parametrize(
    "sent, status", [({"title": ""}, 422), ({"title": "Oolong"}, 409)], ids=["invalid", "expired"]
)
def test_a_form_whose_context_draws_it_is_shown_again_as_its_context_draws_it(
    forms, rdb, saved, sent, status
):
    page = forms.open("/suggest")
    if status == 409:
        rdb.flushall()
    answer = page.submit(sent)
    assert answer.status_code == status and 'role="alert"' in answer.text
    # the context's form, not a 500
    assert "What should we stock next?" in answer.text
    assert f'value="{sent["title"]}"' in answer.text
    again = forms.page("/suggest", answer.text)
    assert again.submit({"title": "Oolong"}).headers["Location"] == "/suggestions/1"
    assert saved(ratings_app.Suggestion) == ["Oolong"]


def test_a_script_whose_session_was_lost_resubmits_with_the_csrf_and_form_tokens_it_got(
    make_app, signups
):
    client = make_app().test_client()
    page = OnceForms(client).open("/signup")
    client.delete_cookie("session")
    lost = page.submit(ADA, json=True)
    assert lost.status_code == 400 and lost.mimetype == "application/problem+json"
    body = lost.json
    assert body["reason"] == "session_lost"
    assert body["csrf_token"] != page.hidden["csrf_token"] and body["form_token"] != page.token
    again = client.post(
        page.url,
        json={**ADA, "form_token": body["form_token"]},
        headers={"X-CSRFToken": body["csrf_token"]},
    )
    assert again.status_code == 201 and again.json == {"status": "created", "location": "/thanks/1"}
    assert signups() == ["ada@example.com"]


def test_a_done_whose_url_the_rows_cannot_fill_stops_every_submit_before_its_token_is_spent(
    make_ratings, rdb, saved
):
    client = make_ratings(suggestion_done="suggestion_by_slug").test_client()
    page = OnceForms(client).open("/suggest")
    live = token_keys(rdb)
    # every submit, until the app is fixed
    for _ in range(2):
        with pytest.raises(
            RuntimeError,
            match="done='suggestion_by_slug': its URL needs "
            "slug, which Suggestion has no attribute for",
        ):
            page.submit({"title": "Oolong"})
    assert token_keys(rdb) == live and saved(ratings_app.Suggestion) == []
    # the next deploy: the same browser session
    fixed = make_ratings().test_client()
    fixed.set_cookie("session", client.get_cookie("session").value)
    done = page.submit({"title": "Oolong"}, client=fixed)
    assert (done.status_code, done.headers["Location"]) == (303, "/suggestions/1")
    assert saved(ratings_app.Suggestion) == ["Oolong"]
