"""/healthz, /readyz, Prometheus /metrics and the JSON request log."""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dev.embedded import free_port
from tests.app.test_logs import json_lines
from tests.conftest import VALID, hidden, lose_the_commit_reply, order_count
from tests.support.api_client import ORDER, new_api_key, place
from tests.support.live import LiveServer, open_form, request
from webapp.orders import FORM
from webapp.request_log import LOGGER
from webapp.request_log import json_lines as formatter


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample in a /metrics page, keyed by (name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, frozenset(labels.items())), 0.0)


def form_data(client) -> dict[str, str]:
    page = client.get("/orders/new").get_data(as_text=True)
    return {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }


def test_health_and_readiness_are_json_and_up_when_both_servers_answer(client):
    health, ready = client.get("/healthz"), client.get("/readyz")
    assert health.status_code == ready.status_code == 200
    assert health.json["status"] == "ok"
    assert ready.json["status"] == "ready"
    assert {name: check["status"] for name, check in ready.json["checks"].items()} == {
        "redis": "up",
        "postgres": "up",
    }
    assert ready.headers["Cache-Control"] == "no-store"


def test_with_redis_down_and_no_signed_forms_readyz_is_503_and_healthz_stays_live(make_app):
    """With forms drawn only with Redis tokens (not the shop's default): a Redis outage
    takes the instance out. The default keeps it in: tests/faults/test_redis_away_ops.py."""
    client = make_app(
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS=False
    ).test_client()
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json["checks"]["redis"]["status"] == "down"
    assert ready.json["checks"]["postgres"]["status"] == "up"
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json["status"] == "degraded"
    assert health.json["checks"]["redis"]["status"] == "down"


def test_with_postgres_down_readyz_is_503_and_names_it(make_app):
    dead = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/webapp_test"
    ready = make_app(DATABASE_URL=dead).test_client().get("/readyz")
    assert ready.status_code == 503
    assert ready.json["checks"]["postgres"]["status"] == "down"
    assert ready.json["checks"]["redis"]["status"] == "up"


def test_metrics_count_tokens_orders_duplicates_and_rejects(client, rdb):
    before = client.get("/metrics").get_data(as_text=True)
    form = form_data(client)
    assert client.post("/orders", data=form).status_code == 303
    # duplicate
    assert client.post("/orders", data=form).status_code == 303
    stale = form_data(client)
    rdb.flushall()
    # expired
    assert client.post("/orders", data=stale).status_code == 409
    assert (
        client.application.test_client().post("/orders", data=form_data(client)).status_code == 400
        # another browser: no session cookie, CSRF fails
    )
    after = client.get("/metrics").get_data(as_text=True)
    assert after.startswith("# HELP") and "text/plain" in client.get("/metrics").content_type

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # four forms rendered, and the CSRF refusal gives its form back with a fresh token
    assert delta("submit_once_tokens_issued_total", form=FORM) == 5
    assert delta("submit_once_tokens_consumed_total", form=FORM) == 1
    assert delta("orders_placed_total", channel="form") == 1
    assert delta("submit_once_duplicates_total", form=FORM, waited="false") == 1
    assert delta("submit_once_rejected_total", form=FORM, reason="expired_or_unknown") == 1
    assert delta("submit_once_rejected_total", form=FORM, reason="session_mismatch") == 1
    assert delta("orders_placed_total", channel="api") == 0
    assert (
        delta("http_request_duration_seconds_count", method="POST", route="/orders", status="303")
        == 2
    )


def test_orders_placed_counts_every_channel_once_labelled_form_or_api(client, servers):
    """Before: API orders were left out (the counter read the order form's outcome)."""
    before = client.get("/metrics").text
    form = form_data(client)
    assert client.post("/orders", data=form).status_code == 303
    # a duplicate: no order
    assert client.post("/orders", data=form).status_code == 303
    key = new_api_key(servers)
    assert place(client, key).status_code == 201
    # a retry: no order
    assert place(client, key).headers["Idempotent-Replayed"] == "true"
    assert place(client, key, {**ORDER, "product": "NO-SUCH"}, key="order-2").status_code == 422
    assert place(client, key, key="order-3").status_code == 201
    after = client.get("/metrics").text
    assert {
        channel: value(after, "orders_placed_total", channel=channel)
        - value(before, "orders_placed_total", channel=channel)
        for channel in ("form", "api")
    } == {"form": 1, "api": 2}
    assert order_count(servers) == 3


def test_an_order_whose_transaction_rolls_back_is_not_counted(client, servers, monkeypatch):
    before = client.get("/metrics").text
    # the INSERT flushed, then no COMMIT
    lose_the_commit_reply(monkeypatch, committed=False)
    assert client.post("/orders", data=form_data(client)).status_code == 503
    assert order_count(servers) == 0
    assert value(client.get("/metrics").text, "orders_placed_total", channel="form") == value(
        before, "orders_placed_total", channel="form"
    )


def test_metrics_add_up_over_gunicorn_workers_and_time_duplicates_that_waited(servers, tmp_path):
    live = LiveServer(
        servers,
        workers=2,
        threads=8,
        TEST_PAUSE_AFTER_CONSUME="1",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    # the production settings
    live.args[3:3] = ["-c", "python:webapp.gunicorn_conf"]
    (tmp_path / "metrics").mkdir()
    # a previous run's samples
    (tmp_path / "metrics" / "counter_1.db").write_bytes(b"stale")
    with live:
        cookie, form = open_form(live.port)
        with ThreadPoolExecutor(20) as pool:
            responses = list(
                pool.map(
                    lambda _: request(live.port, "POST", "/orders", cookie=cookie, form=form),
                    range(20),
                )
            )
        assert [r.status for r in responses] == [303] * 20
        # Ask several times: whichever worker answers, the sums are the same.
        pages = [request(live.port, "GET", "/metrics").body for _ in range(4)]
        output = live.output()
    for page in pages:
        assert value(page, "orders_placed_total", channel="form") == 1
        waited = value(page, "submit_once_duplicates_total", form=FORM, waited="true")
        assert waited + value(page, "submit_once_duplicates_total", form=FORM, waited="false") == 19
        assert waited >= 1, "a 1 s pause after GETDEL makes some duplicates wait"
        assert value(page, "submit_once_duplicate_wait_seconds_count", form=FORM) == waited
    # gunicorn's own lines too: every one is JSON (but the test pauses' own prints)
    lines = json_lines(
        "\n".join(line for line in output.splitlines() if not line.startswith("test hook:"))
    )
    assert any(line["logger"] == "gunicorn.error" for line in lines)
    posts = [line for line in lines if line.get("route") == "/orders"]
    assert len(posts) == 20
    assert sorted(line["outcome"] for line in posts) == ["created"] + ["duplicate"] * 19
    assert form["form_token"] not in output and VALID["email"] not in output
    assert order_count(servers) == 1


def test_gunicorn_start_deletes_only_the_sample_files_in_the_metrics_directory(
    tmp_path, monkeypatch
):
    """PROMETHEUS_MULTIPROC_DIR may name a folder that holds other things (a typo, /run,
    a home directory): on start only a previous run's samples go, nothing else."""
    from webapp import gunicorn_conf

    directory = tmp_path / "metrics"
    samples = [
        "counter_12.db",
        "histogram_12.db",
        "gauge_livesum_12.db",
        "gauge_all_9.db",
        "summary_3.db",
    ]
    others = ["notes.txt", "backup.db", "counter_12.db.bak", "keep/counter_1.db"]
    for name in samples + others:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text("x")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    gunicorn_conf.on_starting(None)
    left = sorted(
        str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()
    )
    assert left == sorted(others)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "new"))
    gunicorn_conf.on_starting(None)
    # created when missing
    assert (tmp_path / "new").is_dir()


@pytest.fixture
def log_lines():
    """The JSON lines the request logger writes, as dicts."""
    lines: list[dict] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(json.loads(formatter().format(record)))
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    yield lines
    logger.removeHandler(handler)


def test_one_json_line_per_request_with_id_route_status_and_hashed_token_only(
    app, client, log_lines
):
    form = form_data(client)
    response = client.post("/orders", data=form, headers={"X-Request-ID": "lb-1234abcd"})
    assert response.status_code == 303
    order = response.location.rsplit("/", 1)[1]
    shown = client.get(response.location)
    assert [line["route"] for line in log_lines] == [
        "/orders/new",
        "/orders",
        "/orders/<public_id>",
    ]
    submit = log_lines[1]
    digest = app.extensions["submit_once"].store.digest(
        form["form_token"], session_id=_session_id(client, app), form=FORM
    )
    assert submit["request_id"] == response.headers["X-Request-ID"] == "lb-1234abcd"
    assert submit["token"] == digest[:12]
    assert submit["status"] == 303 and submit["outcome"] == "created"
    assert submit["method"] == "POST" and submit["ms"] >= 0
    number = re.search(r'data-order-number="([^"]+)"', shown.text).group(1)
    # the number, never the order's key
    assert log_lines[2]["order_number"] == number
    assert log_lines[2]["status"] == shown.status_code
    # new ids when none given
    assert len({line["request_id"] for line in log_lines}) == 3
    text = json.dumps(log_lines)
    for private in (form["form_token"], order, VALID["email"], VALID["name"], "London"):
        assert private not in text


def _session_id(client, app) -> str:
    """The id the app bound this browser's tokens to, read from its signed cookie."""
    cookie = client.get_cookie("session")
    return app.session_interface.get_signing_serializer(app).loads(cookie.value)["_submit_once_sid"]
