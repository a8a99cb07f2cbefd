"""What the shop says and does while Redis is away: /readyz stays 200 (the load balancer
keeps every instance), /healthz and submit_once_degraded say "degraded", the JSON API
places each Idempotency-Key once by the lock and the UNIQUE column (with the fallback off:
a 503 problem that places nothing), and the refund worker says it cannot apply refunds,
then applies what was requested meanwhile."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.orm import Session

from dev.embedded import free_port
from flask_submit_once.testing import OnceForms
from tests.conftest import VALID, order_count, order_page
from tests.refunds.conftest import Worker, refunds_of, wait_until
from tests.refunds.test_worker_ops import metric, scrape
from tests.support.api_client import ORDER, new_api_key, place, problem_type
from webapp import config
from webapp.errors import NOTHING_DONE
from webapp.health import API_WITH_FALLBACK, API_WITHOUT_FALLBACK
from webapp.refunds.monitor import CANNOT
from webapp.shop.order_states import transition

#: The library's default, which a shop may choose: no form without Redis.
STRICT = {"SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS": False}


@pytest.mark.parametrize(
    ("environ", "signed", "fallback"),
    [
        # the shop's default
        ({}, True, True),
        # the strict mode
        ({"SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS": "false"}, False, False),
        ({"SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS": "false"}, True, False),
        (
            {
                "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS": "no",
                "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS": "yes",
            },
            False,
            True,
        ),
    ],
)
def test_signed_forms_are_on_by_default_and_the_fallback_follows_them_unless_set(
    environ, signed, fallback
):
    settings = config.from_environ(
        {
            "APP_ENV": "testing",
            "DATABASE_URL": "postgresql://x",
            "REDIS_URL": "redis://x",
            **environ,
        }
    )
    config.finish(settings)
    assert (
        settings["SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS"],
        settings["SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS"],
    ) == (signed, fallback)


def degraded_gauge(client) -> float:
    page = client.get("/metrics").text
    return next(
        sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == "submit_once_degraded"
    )


def test_while_forms_are_drawn_without_redis_readyz_stays_200_and_health_says_degraded(
    fault_app, fault_servers
):
    client = fault_app().test_client()
    assert client.get("/orders/new").status_code == 200
    assert degraded_gauge(client) == 0 and client.get("/healthz").json["status"] == "ok"
    fault_servers.redis.stop()
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json["status"] == "degraded"
    assert {name: check["status"] for name, check in ready.json["checks"].items()} == {
        "redis": "down",
        "postgres": "up",
    }
    # drawn with a signed token
    assert client.get("/orders/new").status_code == 200
    health = client.get("/healthz")
    assert health.status_code == 200
    assert (health.json["status"], health.json["forms"]) == ("degraded", "signed")
    said = health.json["while_redis_is_away"]
    assert said["api"] == API_WITH_FALLBACK and "UNIQUE column" in said["forms"]
    assert "refund worker applies them once Redis answers" in said["refunds"]
    assert degraded_gauge(client) == 1
    fault_servers.redis.start()
    # a Redis token again
    assert client.get("/orders/new").status_code == 200
    assert degraded_gauge(client) == 0
    health = client.get("/healthz").json
    assert (health["status"], health["forms"]) == ("ok", "redis")
    assert "while_redis_is_away" not in health
    assert client.get("/readyz").json["status"] == "ready"


def test_without_signed_forms_a_redis_outage_takes_the_instance_out_of_rotation(
    fault_app, fault_servers
):
    client = fault_app(**STRICT).test_client()
    fault_servers.redis.stop()
    assert client.get("/orders/new").status_code == 503
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json["status"] == "unavailable"


def test_the_api_places_each_key_once_while_redis_is_away(fault_app, fault_servers):
    """The claim in Redis adds nothing the lock and the UNIQUE digest do not already give
    an order (a model= view): the lock serialises one key's requests, the later ones find
    the first one's row; a retry after Redis is back claims afresh and finds it too."""
    app = fault_app()
    api_key = new_api_key(fault_servers)
    fault_servers.redis.stop()

    def until_answered(_: int):
        client = app.test_client()
        # still running
        while (answer := place(client, api_key)).status_code == 409:
            assert answer.headers["Retry-After"] == "1"
        return answer

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(until_answered, range(8)))
    assert {answer.status_code for answer in answers} == {201}
    assert len({answer.headers["Location"] for answer in answers}) == 1
    assert [a.headers.get("Idempotent-Replayed") for a in answers].count(None) == 1
    client = app.test_client()
    reused = place(client, api_key, {**ORDER, "quantity": 3})
    assert reused.status_code == 422 and problem_type(reused) == "idempotency-key-reused"
    assert place(client, api_key, key="order-2").status_code == 201
    fault_servers.redis.start()
    retry = place(client, api_key)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["Location"] == answers[0].headers["Location"]
    assert order_count(fault_servers) == 2


def test_with_the_fallback_off_the_api_answers_a_503_problem_and_places_nothing(
    fault_app, fault_servers
):
    app = fault_app(SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS=False)
    client, api_key = app.test_client(), new_api_key(fault_servers)
    fault_servers.redis.stop()
    away = place(client, api_key)
    assert away.status_code == 503 and problem_type(away) == "unavailable"
    assert away.headers["Retry-After"] == "5" and away.json["detail"] == NOTHING_DONE
    assert order_count(fault_servers) == 0
    assert client.get("/healthz").json["while_redis_is_away"]["api"] == API_WITHOUT_FALLBACK
    fault_servers.redis.start()
    placed = place(client, api_key)
    assert placed.status_code == 201 and "Idempotent-Replayed" not in placed.headers
    assert order_count(fault_servers) == 1


def test_the_refund_worker_says_what_it_cannot_do_and_applies_what_waited_after(
    fault_app, fault_servers
):
    port = free_port()
    worker = Worker(fault_servers, REFUND_MONITOR_BIND=str(port))
    try:
        worker.wait_for("reading refunds")
        forms = OnceForms(fault_app().test_client())
        order = order_page(forms).submit(VALID).headers["Location"]
        with Session(fault_servers.engine) as db, db.begin():
            order_id = db.scalar(text("SELECT id FROM orders"))
            transition(db, order_id, "pay", paid_cents=3600)
        fault_servers.redis.stop()
        health = wait_until(
            lambda: (
                (body := json.loads(scrape(port, "/healthz")[1]))["status"] == "degraded" and body
            ),
            what="the worker to see it",
        )
        assert health["cannot"] == [CANNOT["redis"]]
        wait_until(
            lambda: metric(scrape(port, "/metrics")[1], "refund_worker_degraded") == 1,
            what="the gauge",
        )
        # The shopper's refund is taken meanwhile (a signed form), and waits in PostgreSQL.
        assert forms.open(f"{order}/refund").submit({"amount": "10"}).status_code == 303
        assert refunds_of(fault_servers, order_id)[0] == 0
        fault_servers.redis.start()
        wait_until(
            lambda: refunds_of(fault_servers, order_id)[:2] == (1, 1000),
            what="the refund requested during the outage to be applied",
        )
        worker.wait_for("the refund stream answers again")
        assert json.loads(scrape(port, "/healthz")[1])["status"] == "ok"
        assert metric(scrape(port, "/metrics")[1], "refund_worker_degraded") == 0
        said = [
            line for line in worker.output().splitlines() if "cannot read the refund stream" in line
        ]
        assert len(said) == 1, "said once an outage, not every second"
        assert worker.stop() == 0
    finally:
        worker.close()
