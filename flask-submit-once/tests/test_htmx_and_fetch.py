"""The same protected forms posted by htmx and by a script (``fetch``): the answers each
front end needs, from the same view code; two forms on one page; a form answered only in
JSON, with no template."""

from __future__ import annotations

import re

import pytest

ADA = {"email": "ada@example.com", "name": "Ada", "quantity": "2"}
HTMX = {"HX-Request": "true"}
JSON = {"Accept": "application/json"}


def comments(sessions) -> list[str]:
    from sqlalchemy import select

    from signup_app import Comment

    with sessions() as db:
        return list(db.scalars(select(Comment.text).order_by(Comment.id)))


def test_htmx_is_sent_to_the_result_page_and_a_repeat_to_the_same(once_forms, signups):
    page = once_forms.open("/signup")
    first, second = page.submit_twice(ADA, headers=HTMX)
    assert (first.status_code, first.headers["HX-Redirect"]) == (200, "/thanks/1")
    assert second.headers["HX-Redirect"] == "/thanks/1" and "Location" not in first.headers
    assert signups() == ["ada@example.com"]


def test_htmx_gets_only_the_form_back_for_invalid_fields_with_the_same_token(once_forms):
    page = once_forms.open("/signup")
    invalid = page.submit({**ADA, "email": "nope"}, headers=HTMX)
    assert invalid.status_code == 422 and invalid.text.lstrip().startswith('<form id="signup"')
    assert "<html>" not in invalid.text and "Invalid email address" in invalid.text
    assert once_forms.page("/signup", invalid.text).token == page.token


def test_htmx_in_place_shows_the_result_with_a_fresh_form_for_the_next(once_forms, sessions):
    # the comment form
    page = once_forms.open("/signup", form=1)
    answer = page.submit({"text": "First!"}, headers=HTMX)
    assert answer.status_code == 201 and answer.headers["Content-Location"] == "/comments/1"
    assert '<p class="comment" id="comment-1">First!</p>' in answer.text
    # the form it swapped in
    following = once_forms.page("/signup", answer.text)
    assert following.token not in (None, page.token)
    assert following.submit({"text": "Second"}, headers=HTMX).status_code == 201
    assert comments(sessions) == ["First!", "Second"]


def test_an_htmx_double_click_answered_in_place_shows_the_same_result_twice(once_forms, sessions):
    page = once_forms.open("/signup", form=1)
    answers = page.submit_twice({"text": "First!"}, headers=HTMX)
    assert [answer.status_code for answer in answers] == [201, 200]
    shown = [re.search(r'<p class="comment".*?</p>', answer.text).group() for answer in answers]
    assert shown[0] == shown[1] == '<p class="comment" id="comment-1">First!</p>'
    assert once_forms.assert_once(answers, rows=lambda: len(comments(sessions))) == "/comments/1"


def test_a_script_sends_the_token_in_the_json_body_and_gets_json(once_forms, signups):
    page = once_forms.open("/signup")
    first, second = page.submit_twice(ADA, json=True)
    assert first.status_code == 201 and second.status_code == 200
    assert first.json == {"status": "created", "location": "/thanks/1"}
    assert second.json == {"status": "duplicate", "location": "/thanks/1"}
    assert first.headers["Location"] == second.headers["Location"] == "/thanks/1"
    assert signups() == ["ada@example.com"]


def test_a_script_may_send_the_token_in_a_header_with_a_form_body(once_forms, client):
    page = once_forms.open("/signup")
    answer = client.post(
        page.url, data={**page.hidden, **ADA}, headers={**JSON, "X-Submit-Once-Token": page.token}
    )
    assert answer.status_code == 201 and answer.json["location"] == "/thanks/1"


def test_a_script_gets_the_field_errors_and_what_to_do_in_a_422(once_forms):
    page = once_forms.open("/signup")
    invalid = page.submit({**ADA, "email": "nope", "quantity": "0"}, json=True)
    assert invalid.status_code == 422 and invalid.mimetype == "application/problem+json"
    body = invalid.json
    assert body["reason"] == "invalid" and body["status"] == 422
    assert body["detail"] and "errors" in body["detail"]
    assert set(body["errors"]) == {"email", "quantity"}
    assert body["errors"]["email"] == ["Invalid email address."]
    # the same token: fix the fields and resend
    assert body["form_token"] == page.token


def test_a_script_that_resubmits_other_values_is_told_changed_and_where_the_first_is(
    once_forms, signups
):
    page = once_forms.open("/signup")
    page.submit(ADA, json=True)
    changed = page.submit({**ADA, "email": "grace@example.com"}, json=True)
    assert changed.status_code == 409 and changed.json["reason"] == "changed"
    assert changed.json["existing"] == "/thanks/1" and changed.json["detail"]
    fresh = changed.json["form_token"]
    assert fresh != page.token and signups() == ["ada@example.com"]
    # what the script sends next
    page.token = fresh
    assert page.submit({**ADA, "email": "grace@example.com"}, json=True).status_code == 201


def test_two_forms_on_one_page_each_find_their_own_token(once_forms, signups, sessions):
    signup, comment = (
        once_forms.open("/signup"),
        once_forms.page("/signup", once_forms.client.get("/signup").text, form=1),
    )
    assert signup.token != comment.token
    assert comment.submit({"text": "Hello"}).headers["Location"] == "/comments/1"
    # The sign-up form shown again for its errors draws the comment form with a token too.
    invalid = signup.submit({**ADA, "email": ""})
    again = once_forms.page("/signup", invalid.text, form=1)
    assert invalid.status_code == 422 and again.token not in (None, signup.token)
    assert signup.submit(ADA).status_code == 303
    assert again.submit({"text": "Bye"}).status_code == 303
    assert signups() == ["ada@example.com"] and comments(sessions) == ["Hello", "Bye"]


@pytest.mark.parametrize("headers", [{}, JSON], ids=["plain", "json"])
def test_a_json_only_form_with_no_template_answers_in_json(client, headers):
    """A form a page's script posts (its token in a data attribute): no template to
    draw, so whatever the request asks for, what is not a result is problem+json."""
    page = client.get("/signup").text
    token = re.search(r'data-token="([^"]+)"', page).group(1)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    sent = {"X-CSRFToken": csrf, "X-Submit-Once-Token": token, **headers}
    invalid = client.post("/newsletter", data={"email": "nope"}, headers=sent)
    assert invalid.status_code == 422 and invalid.mimetype == "application/problem+json"
    assert invalid.json["errors"] == {"email": ["Invalid email address."]}
    assert invalid.json["form_token"] == token
    done = client.post("/newsletter", data={"email": "ada@example.com"}, headers=sent)
    assert done.status_code == (201 if headers else 303)
    assert done.headers["Location"] == "/newsletter/1"


def test_every_answer_of_one_url_says_it_varies_by_front_end(once_forms):
    """One URL answers a page, an htmx fragment or JSON: a cache
    that keys only on the URL must not give one front end another's answer."""
    page = once_forms.open("/signup")
    answers = [
        # invalid: the form
        page.submit({**ADA, "email": "nope"}, headers=headers)
        for headers in ({}, HTMX, JSON)
    ]
    # the 303 to the result
    answers.append(page.submit(ADA))
    for answer in answers:
        assert {"HX-Request", "Accept"} <= set(answer.vary), (answer.status_code, answer.vary)


def test_a_script_that_sends_a_lone_surrogate_is_answered_without_a_500(once_forms, signups):
    # "\ud800" is valid JSON text for a string no UTF-8 can carry (it was a 500: in the
    # fingerprint, then in the INSERT): a clear 400, nothing spent, nothing stored.
    page = once_forms.open("/signup")
    answer = page.submit({**ADA, "name": "Ada \ud800"}, json=True)
    assert answer.status_code == 400 and answer.mimetype == "application/problem+json"
    assert answer.json["reason"] == "not_unicode" and "not valid Unicode" in answer.json["detail"]
    assert signups() == []
    # the same token, still good
    assert page.submit(ADA, json=True).status_code == 201


@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["missing", "malformed"])
def test_a_script_without_a_good_token_gets_problem_json_and_a_page_gets_the_apps_400(
    once_forms, client, signups, token
):
    page = once_forms.open("/signup")
    body = {**ADA, "csrf_token": page.hidden["csrf_token"]}
    if token is not None:
        body["form_token"] = token
    script = client.post(page.url, json=body, headers={**JSON, "X-CSRFToken": body["csrf_token"]})
    assert script.status_code == 400 and script.mimetype == "application/problem+json"
    assert script.json["reason"] == "bad_form_token" and "form token" in script.json["detail"]
    plain = client.post(page.url, data=body)
    assert plain.status_code == 400 and plain.mimetype == "text/html"
    assert signups() == []
