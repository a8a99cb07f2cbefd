"""A form in several steps (signup_app's sign-up in two steps: who, then how many seats):
the first step's page issues the token of the last step's form, each step carries it
(``submit_once.carry_token``) and validates its own fields consuming nothing, and only the
last step takes effect, once, however the user goes Back and forward between the steps."""

from __future__ import annotations

import pytest
import redis
from flask.testing import FlaskClient

from flask_submit_once.testing import FormPage, OnceForms

START = "/signup/steps"
ADA = {"email": "ada@example.com", "name": "Ada"}
GRACE = {"email": "grace@example.com", "name": "Grace"}
SEATS = {"quantity": "2"}


def next_step(once_forms: OnceForms, page: FormPage, details: dict[str, str]) -> FormPage:
    """Fill in the first step and press Next: the second step's page (200 expected)."""
    answer = page.submit(details)
    assert answer.status_code == 200, answer.text[:400]
    return once_forms.page(page.url, answer.text)


def test_each_step_carries_the_token_the_first_page_was_issued(once_forms, rdb):
    first = once_forms.open(START)
    keys = sorted(rdb.keys("so:*"))
    answer = first.submit(ADA)
    second = once_forms.page(first.url, answer.text)
    assert second.token == first.token and second.hidden["email"] == ADA["email"]
    # Back shows it as it was, as it shows the first step
    assert answer.headers["Cache-Control"] == "private, no-cache"
    # nothing issued, nothing consumed
    assert sorted(rdb.keys("so:*")) == keys


def test_a_step_sends_redis_no_command_however_often_next_is_pressed(make_app, own_redis):
    """Only the first page issues and only the last step consumes: Next costs Redis nothing."""
    once_forms = OnceForms(make_app(REDIS_URL=own_redis.url).test_client())
    first = once_forms.open(START)
    with redis.Redis.from_url(own_redis.url, decode_responses=True) as rdb:

        def commands() -> dict[str, int]:
            stats = rdb.info("commandstats")
            return {name: stat["calls"] for name, stat in stats.items() if name != "cmdstat_info"}

        before = commands()
        for _ in range(5):
            assert first.submit(ADA).status_code == 200
        assert first.submit({**ADA, "email": "not an address"}).status_code == 422
        assert commands() == before


def test_back_next_confirm_signs_up_once_and_both_confirms_land_on_it(once_forms, signups):
    first = once_forms.open(START)
    second = next_step(once_forms, first, ADA)
    # Back to the first step, Next again: the same token, so one sign-up
    again = next_step(once_forms, first, ADA)
    assert again.token == second.token == first.token
    answers = [again.submit(SEATS), second.submit(SEATS)]
    assert [answer.status_code for answer in answers] == [303, 303]
    once_forms.assert_once(answers, rows=lambda: len(signups()))


def test_confirm_back_back_next_confirm_lands_on_the_first_result(once_forms, signups):
    first = once_forms.open(START)
    confirmed = next_step(once_forms, first, ADA).submit(SEATS)
    # Back, Back: the first step as it was; Next, Confirm
    repeated = next_step(once_forms, first, ADA).submit(SEATS)
    assert once_forms.assert_once([confirmed, repeated], rows=lambda: len(signups())) == (
        "/thanks/1"
    )


def test_confirm_back_back_edit_next_confirm_is_told_and_saves_nothing_new(once_forms, signups):
    first = once_forms.open(START)
    placed = next_step(once_forms, first, ADA).submit(SEATS)
    edited = next_step(once_forms, first, GRACE).submit(SEATS)
    assert edited.status_code == 409 and "already used, with other details" in edited.text
    assert 'value="grace@example.com"' in edited.text
    fresh = once_forms.page(first.url, edited.text)
    assert fresh.token not in (None, first.token) and signups() == ["ada@example.com"]
    assert fresh.submit(SEATS).headers["Location"] != placed.headers["Location"]
    assert signups() == ["ada@example.com", "grace@example.com"]


def test_twenty_concurrent_confirms_sign_up_once_and_all_land_on_it(once_forms, signups):
    second = next_step(once_forms, once_forms.open(START), ADA)
    answers = second.submit_concurrently([SEATS] * 20)
    assert {answer.status_code for answer in answers} == {303}
    once_forms.assert_once(answers, rows=lambda: len(signups()))


def test_twenty_concurrent_nexts_then_their_confirms_sign_up_once(once_forms, signups):
    """Next pressed in twenty tabs of the first step, each confirmed: one sign-up."""
    first = once_forms.open(START)
    steps = first.submit_concurrently([ADA] * 20)
    assert {answer.status_code for answer in steps} == {200}
    seconds = [once_forms.page(first.url, answer.text) for answer in steps]
    assert {page.token for page in seconds} == {first.token}
    once_forms.assert_once([page.submit(SEATS) for page in seconds], rows=lambda: len(signups()))


def test_a_steps_invalid_input_is_shown_again_with_the_flows_token(once_forms, rdb, signups):
    first = once_forms.open(START)
    keys = sorted(rdb.keys("so:*"))
    invalid = first.submit({**ADA, "email": "not an address"})
    assert invalid.status_code == 422 and "email: Invalid email address." in invalid.text
    assert 'value="not an address"' in invalid.text and 'value="Ada"' in invalid.text
    shown = once_forms.page(first.url, invalid.text)
    assert shown.token == first.token and sorted(rdb.keys("so:*")) == keys
    second = next_step(once_forms, shown, ADA)
    assert second.submit(SEATS).status_code == 303 and signups() == ["ada@example.com"]


def test_the_last_steps_invalid_input_is_shown_again_with_the_flows_token(once_forms, signups):
    first = once_forms.open(START)
    second = next_step(once_forms, first, ADA)
    invalid = second.submit({"quantity": "11"})
    assert invalid.status_code == 422 and "quantity:" in invalid.text
    assert 'value="11"' in invalid.text and 'value="ada@example.com"' in invalid.text
    shown = once_forms.page(first.url, invalid.text)
    assert shown.token == first.token and signups() == []
    answers = [shown.submit(SEATS), second.submit(SEATS)]
    once_forms.assert_once(answers, rows=lambda: len(signups()))


@pytest.mark.parametrize(
    "token", [None, "", "a" * 42, ["a" * 43, "b" * 43]], ids=["missing", "empty", "short", "twice"]
)
def test_a_step_sent_without_a_token_is_a_400_and_issues_none(
    once_forms, client: FlaskClient, rdb, token
):
    """A step that drew a token of its own would let Back, Next, Confirm sign up twice."""
    first = once_forms.open(START)
    keys = sorted(rdb.keys("so:*"))
    data = {**first.hidden, **ADA, **({} if token is None else {"form_token": token})}
    answer = client.post(first.url, data=data)
    assert answer.status_code == 400 and sorted(rdb.keys("so:*")) == keys


def test_a_step_sent_another_forms_token_draws_the_last_step_with_a_fresh_one(once_forms, signups):
    """Another form's token could never sign up here: carrying it would be a dead end."""
    other = once_forms.open("/signup")
    first = once_forms.open(START)
    answer = first.submit({**ADA, "form_token": other.token})
    second = once_forms.page(first.url, answer.text)
    assert answer.status_code == 200 and second.token not in (None, other.token, first.token)
    assert second.submit(SEATS).status_code == 303 and signups() == ["ada@example.com"]


def test_the_token_is_carried_in_the_field_the_app_names(make_app, signups):
    app = make_app(SUBMIT_ONCE_FIELD_NAME="once")
    once_forms = OnceForms(app.test_client(), field="once")
    first = once_forms.open(START)
    answer = first.submit(ADA)
    assert 'name="once"' in answer.text and "form_token" not in answer.text
    second = once_forms.page(first.url, answer.text)
    assert second.token == first.token
    once_forms.assert_once(second.submit_twice(SEATS), rows=lambda: len(signups()))
