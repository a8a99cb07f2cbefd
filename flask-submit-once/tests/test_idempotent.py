"""``@submit_once.idempotent``: an API view that takes effect once per Idempotency-Key its
caller chooses, on a real Redis and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from flask_submit_once import signals
from signup_app import Signup, submit_once

ADA = {"email": "ada@example.com"}


def post(client, body, key="key-1", **headers):
    return client.post("/api/signups", json=body, headers={"Idempotency-Key": key, **headers})


def test_a_retry_gets_the_first_answer_again_marked_replayed(client, signups):
    first = post(client, ADA)
    again = post(client, ADA)
    assert (first.status_code, first.json) == (201, {"id": 1, "email": "ada@example.com"})
    assert (again.status_code, again.json) == (201, first.json)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert signups() == ["ada@example.com"]


def test_a_key_reused_for_another_request_is_a_422_and_does_nothing(client, signups):
    post(client, ADA)
    other = post(client, {"email": "grace@example.com"})
    assert other.status_code == 422 and other.mimetype == "application/problem+json"
    assert other.json["reason"] == "changed" and other.json["detail"]
    assert signups() == ["ada@example.com"]


def test_one_callers_key_means_nothing_to_anothers(client, signups):
    assert post(client, ADA, **{"X-Client": "a"}).status_code == 201
    assert post(client, ADA, **{"X-Client": "b"}).status_code == 201
    assert post(client, ADA, **{"X-Client": "b"}).headers["Idempotent-Replayed"] == "true"
    assert signups() == ["ada@example.com", "ada@example.com"]


def test_a_request_without_its_key_is_a_400_problem_and_does_nothing(client, signups, rdb):
    """The documented key=lambda: request.headers["Idempotency-Key"], header missing."""
    missing = client.post("/api/signups", json=ADA)
    assert missing.status_code == 400 and missing.mimetype == "application/problem+json"
    assert missing.json["reason"] == "missing_key" and missing.json["detail"]
    assert signups() == [] and rdb.keys("so:*") == []


def test_a_retry_while_the_first_still_runs_is_a_409_to_retry_after(app, client, signups):
    holding, release = threading.Event(), threading.Event()

    # the first request, holding the key's lock
    def hold(sender, **extra):
        holding.set()
        assert release.wait(30)

    answers = []
    first = threading.Thread(target=lambda: answers.append(post(app.test_client(), ADA)))
    with signals.token_consumed.connected_to(hold, sender=app):
        first.start()
        try:
            assert holding.wait(30)
            running = post(client, ADA)
        finally:
            release.set()
            first.join(30)
    assert running.status_code == 409 and running.json["reason"] == "still_running"
    assert running.headers["Retry-After"] == "1"
    assert answers[0].status_code == 201
    assert post(client, ADA).headers["Idempotent-Replayed"] == "true"
    assert signups() == ["ada@example.com"]


@pytest.mark.parametrize(
    "failing, status",
    [({"email": "nope"}, 400), ({**ADA, "refuse": True}, 409)],
    ids=["view-raises", "view-refuses"],
)
def test_a_request_that_did_nothing_gives_its_key_back(client, signups, failing, status):
    failed = post(client, failing)
    assert failed.status_code == status and signups() == []
    if status == 409:
        assert failed.json == {**failed.json, "reason": "refused", "detail": "Sign-ups are closed."}
    # the same key, the request put right
    retried = post(client, ADA)
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers
    assert signups() == ["ada@example.com"]


def test_a_commit_nobody_can_confirm_keeps_the_key_and_the_retry_settles_it(
    app, client, engine, rdb, signups
):
    """The database connection dies inside the transaction: whether it committed is not
    known, so the key stays claimed, and the retry lands on the row or makes it once."""

    def cut_the_connection(sender, **extra):
        pid = submit_once.session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    with signals.token_consumed.connected_to(cut_the_connection, sender=app):
        lost = post(client, ADA)
    assert lost.status_code == 503 and lost.json["reason"] == "unconfirmed"
    assert lost.headers["Retry-After"] == "5"
    claimed = [key for key in rdb.keys("so:*") if not key.startswith("so:issued:")]
    assert len(claimed) == 1, "the key is still claimed"
    assert post(client, ADA).status_code == 201
    assert post(client, ADA).headers["Idempotent-Replayed"] == "true"
    assert signups() == ["ada@example.com"]


def test_key_digest_is_what_the_view_stored_for_that_key(app, client, sessions):
    """A worker or a report finds what a webhook's event made from the event's id alone,
    without copying how the library makes a digest."""
    sent = client.post("/webhooks/signups", json={"event_id": "evt_7", "email": "ada@x.org"})
    assert sent.status_code == 200
    with app.app_context():
        digest = submit_once.key_digest("evt_7", name="webhook:signups", scope="provider")
        others = [
            submit_once.key_digest("evt_8", name="webhook:signups", scope="provider"),
            submit_once.key_digest("evt_7", name="webhook:signups"),
            submit_once.key_digest("evt_7", name="api_sign_up", scope="provider"),
        ]
    with sessions() as db:
        row = Signup.find_submission(db, digest)
        assert (row.id, row.email) == (sent.json["id"], "ada@x.org")
        assert [Signup.find_submission(db, other) for other in others] == [None, None, None]
