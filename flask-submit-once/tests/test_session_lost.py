"""A submit whose session check fails (Flask-WTF's CSRFError), answered by the extension
with no handler of the app's: the user's own lost session gets the form again; another
site's post gets nothing."""

from __future__ import annotations

import pytest
from flask_wtf.csrf import CSRFError

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}
EVIL = {
    "Origin": "https://evil.example",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Dest": "document",
}
# what the other site posts; must never be echoed
MARK = "marker-4b1d@example.com"


def token_keys(rdb) -> list[str]:
    return sorted(key for key in rdb.keys("so:*") if not key.startswith("so:issued:"))


def test_a_lost_session_shows_the_form_again_with_the_input_and_fresh_tokens(once_forms, signups):
    page = once_forms.open("/signup")
    # it expired while the form was open
    once_forms.client.delete_cookie("session")
    lost = page.submit(ADA)
    assert lost.status_code == 400 and "Your session had expired" in lost.text
    assert 'value="ada@example.com"' in lost.text and 'value="Ada Lovelace"' in lost.text
    again = once_forms.page("/signup", lost.text)
    assert again.token not in (None, page.token)
    assert again.hidden["csrf_token"] != page.hidden["csrf_token"]
    # the new session those tokens belong to
    assert lost.headers.get("Set-Cookie")
    assert signups() == []
    assert again.submit(ADA).status_code == 303 and signups() == ["ada@example.com"]


def test_a_script_whose_session_was_lost_gets_a_problem_with_the_next_token(once_forms):
    page = once_forms.open("/signup")
    once_forms.client.delete_cookie("session")
    lost = page.submit(ADA, json=True)
    assert lost.status_code == 400 and lost.json["reason"] == "session_lost"
    assert lost.json["form_token"] not in (None, page.token)


@pytest.mark.parametrize("with_cookie", [False, True], ids=["no-cookie", "old-browser"])
def test_another_sites_post_is_refused_echoing_nothing_and_setting_no_cookie(
    once_forms, client, rdb, signups, with_cookie
):
    """A page on another site posts the form (its visitor's session
    cookie is not sent, SameSite; an old browser sends it). The answer must not show
    what was posted back, issue a token or start a session: a 403, nothing else."""
    page = once_forms.open("/signup")
    if not with_cookie:
        client.delete_cookie("session")
    keys = token_keys(rdb)
    answer = client.post(
        page.url,
        headers=EVIL,
        data={"form_token": page.token, "csrf_token": "forged", **ADA, "email": MARK},
    )
    assert answer.status_code == 403 and "only from our own pages" in answer.text
    assert MARK not in answer.text and "Ada Lovelace" not in answer.text
    assert "Set-Cookie" not in answer.headers
    assert token_keys(rdb) == keys and signups() == []


def test_an_app_with_its_own_csrf_handler_asks_the_extension_first(make_app, once_forms):
    from signup_app import submit_once

    app = make_app()
    seen = []

    @app.errorhandler(CSRFError)
    def own(error: CSRFError):
        seen.append(error)
        return submit_once.session_lost(error) or ("Our own page for the rest.", 400)

    @app.post("/unprotected")
    def unprotected() -> str:
        return "never"

    client = app.test_client()
    page = once_forms.page("/signup", client.get("/signup").text)
    client.delete_cookie("session")
    lost = page.submit(ADA, client=client)
    assert lost.status_code == 400 and 'value="ada@example.com"' in lost.text
    other = client.post("/unprotected")
    assert (other.status_code, other.text) == (400, "Our own page for the rest.")
    assert len(seen) == 2
