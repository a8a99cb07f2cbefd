"""A worker process killed (SIGKILL) after its submit spent the token with GETDEL, inside
the transaction: nothing of that submit is left, and the user's resubmit recovers."""

from __future__ import annotations

import http.client
import signal
import threading

from live import hidden, signup_worker

ADA = {"email": "ada@example.com", "name": "Ada Lovelace", "quantity": "2"}


def token_keys(rdb) -> list[str]:
    return [key for key in rdb.keys("so:*") if not key.startswith("so:issued:")]


def test_a_worker_killed_after_the_getdel_leaves_no_half_row_and_a_resubmit_recovers(
    make_app, redis_url, database_url, signups, rdb
):
    with signup_worker(redis_url, database_url, ADA) as (worker, browser, form):
        issued = token_keys(rdb)
        lost: list[BaseException] = []

        def submit() -> None:
            try:
                browser.post("/signup/send", form)
            except (OSError, http.client.HTTPException) as error:
                # what the browser shows as a network error
                lost.append(error)

        posting = threading.Thread(target=submit)
        posting.start()
        consumed = worker.stdout.readline()
        # whatever it said: never left running
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        posting.join(30)
    assert consumed == f"consumed {worker.pid}\n"
    # no half row: its transaction died with it
    assert lost and signups() == []
    # spent, and not given back
    assert len(token_keys(rdb)) == len(issued) - 1
    # The user resubmits; another worker answers (the same browser session).
    client = make_app().test_client()
    client.set_cookie("session", browser.cookies["session"])
    reload = client.post("/signup/send", data=form)
    assert reload.status_code == 409 and "had expired or was already used" in reload.text
    assert 'value="Ada Lovelace"' in reload.text
    fresh = hidden(reload.text, "form_token")
    assert fresh != form["form_token"]
    done = client.post("/signup/send", data={**form, "form_token": fresh})
    assert done.status_code == 303 and signups() == ["ada@example.com"]
