"""What an attacker reads first: /metrics, forged cross-site submits, the
proxy in front, and the secrets production starts with."""

from __future__ import annotations

import secrets

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cancel.test_cancel import cancel_form
from tests.conftest import VALID, hidden, order_count
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.live import Connection, LiveServer
from webapp import create_app
from webapp.config import finish, from_environ
from webapp.metrics import METHODS
from webapp.secret_rules import DEV_SECRET_KEY, DEV_WEBHOOK_SECRET

#: Secrets production accepts (random, 32 bytes and more).
KEY = secrets.token_hex(32)
TOKEN = secrets.token_hex(32)
OTHER = secrets.token_hex(32)
SCRIPT = '<script>alert("x")</script>'


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "env, token, headers, status",
    [
        # off when unset in production
        ("production", None, {}, 404),
        ("production", None, bearer("anything"), 404),
        ("production", TOKEN, {}, 401),
        ("production", TOKEN, bearer(TOKEN[:-1]), 401),
        ("production", TOKEN, bearer(TOKEN + "x"), 401),
        ("production", TOKEN, {"Authorization": f"Basic {TOKEN}"}, 401),
        ("production", TOKEN, bearer(TOKEN), 200),
        # set: required in every environment
        ("testing", TOKEN, {}, 401),
        # unset: open in testing/development
        ("testing", None, {}, 200),
    ],
    ids=lambda value: "token" if value == TOKEN else None,
    # the same names in every run
)
def test_metrics_need_the_bearer_token(make_app, env, token, headers, status):
    app = make_app(APP_ENV=env, SECRET_KEY=KEY, METRICS_TOKEN=token)
    response = app.test_client().get("/metrics", headers=headers, base_url="https://localhost")
    assert response.status_code == status
    if status == 401:
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "# HELP" not in response.text


def test_metrics_labels_name_no_order_and_no_invented_method(make_app):
    client = make_app(METRICS_TOKEN=TOKEN).test_client()
    order = order_path(submit(client, open_form(client)))
    key = order.rsplit("/", 1)[1]
    client.post(f"{order}/cancel", data=cancel_form(client, order))
    for verb in ("QQA", "QQB", "get", "PROPFIND", "X" * 200):
        assert client.open("/orders/new", method=verb).status_code < 500
    page = client.get("/metrics", headers=bearer(TOKEN)).text
    # the kind of form, never which
    assert key not in page and ":public_id=" not in page
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    assert labels["method"] <= METHODS | {"OTHER"} and "OTHER" in labels["method"]
    # The forms' endpoints, and the API's and the webhook's keys ("api:orders",
    # "webhook:payments"), when a test in this process sent them (the counters are the
    # process's: an earlier test's amendment form counts too).
    assert labels["form"] <= {
        "orders.create",
        "orders.amend",
        "cancel.cancel",
        "refunds.create",
        "api",
        "webhook",
    }
    assert "cancel.cancel" in labels["form"]
    # rules, not paths
    assert all("<" not in r or r.startswith("/") for r in labels["route"])
    assert not any(key in r for r in labels["route"])


def test_a_cross_site_forged_post_echoes_nothing_and_leaves_the_session_alone(app, servers):
    victim = app.test_client()
    tokens = open_form(victim)
    cookie = victim.get_cookie("session").value
    forged = {
        **VALID,
        "name": SCRIPT,
        "email": "forged@evil.example",
        "address": "1 Forged Lane",
        "form_token": tokens["form_token"],
    }
    # A browser sends no Lax cookie with a cross-site POST; an older one might.
    for client in (app.test_client(), victim):
        response = client.post(
            "/orders",
            data=forged,
            headers={"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        )
        html = response.text
        assert response.status_code == 403
        assert "could not confirm that this form was sent from our own site" in html
        for sent in ("forged@evil.example", "Forged Lane", "alert", tokens["form_token"]):
            assert sent not in html
        assert 'name="form_token"' not in html and 'name="csrf_token"' not in html
        assert "Set-Cookie" not in response.headers
    assert victim.get_cookie("session").value == cookie and order_count(servers) == 0
    # the victim's open form still works
    assert submit(victim, tokens).status_code == 303


def test_a_same_site_session_loss_keeps_the_input(app):
    client = app.test_client()
    html = client.post(
        "/orders",
        data={**VALID, "form_token": "a" * 43},
        headers={"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"},
    ).text
    assert "Your session expired" in html and VALID["email"] in html
    assert hidden(html, "form_token")


@pytest.mark.parametrize(
    "proxies, forwarded, hsts",
    [
        # nobody trusted: a client cannot claim HTTPS
        (0, "https", False),
        (1, "https", True),
        (1, "http", False),
        (2, "https, https", True),
    ],
)
def test_hsts_whenever_the_request_is_secure_as_the_trusted_proxy_saw_it(
    make_app, proxies, forwarded, hsts
):
    client = make_app(TRUSTED_PROXIES=proxies).test_client()
    response = client.get(
        "/orders/new", headers={"X-Forwarded-Proto": forwarded, "X-Forwarded-For": "203.0.113.9"}
    )
    assert response.status_code == 200
    assert ("Strict-Transport-Security" in response.headers) == hsts


@pytest.mark.parametrize(
    "proxies, claims_https",
    [
        # nobody trusted: no header makes HTTPS
        ("0", {}),
        # ProxyFix reads this one header, no other
        ("1", {"X-Forwarded-Proto": "https"}),
    ],
)
def test_under_gunicorn_only_trusted_proxies_make_a_plain_http_request_https(
    servers, proxies, claims_https
):
    """gunicorn's own forwarded-header trust (from loopback, by default) would let any
    client on the host claim HTTPS whatever TRUSTED_PROXIES says."""
    live = LiveServer(
        servers,
        workers=1,
        threads=2,
        APP_ENV="production",
        SECRET_KEY=secrets.token_hex(32),
        TRUSTED_PROXIES=proxies,
    )
    # the production settings
    live.args[3:3] = ["-c", "python:webapp.gunicorn_conf"]
    with live:
        connection = Connection(live.port)
        try:
            for header, value in [
                ("X-Forwarded-Proto", "https"),
                ("X-Forwarded-Ssl", "on"),
                ("X-Forwarded-Protocol", "ssl"),
                ("X-Forwarded-Scheme", "https"),
            ]:
                response = connection.send("GET", "/orders/new", headers={header: value})
                assert response.status == 200, live.output()
                hsts = "strict-transport-security" in response.headers
                assert hsts == (claims_https.get(header) == value), (header, value)
        finally:
            connection.close()


@pytest.mark.parametrize(
    "env, trusted, host, served",
    [
        # scripts/run
        ("development", None, "127.0.0.1:5000", True),
        ("development", None, "localhost:5000", True),
        # DNS rebinding
        ("development", None, "rebound.evil.example:5000", False),
        ("production", "shop.example, .shop.example", "shop.example", True),
        ("production", "shop.example, .shop.example", "www.shop.example", True),
        ("production", "shop.example", "evil.example", False),
    ],
)
def test_only_the_trusted_hosts_are_answered(make_app, monkeypatch, env, trusted, host, served):
    """A page on another site whose name is rebound to 127.0.0.1 reaches scripts/run
    (where the webhook secret is the public one) with its own name as Host."""
    if trusted:
        monkeypatch.setenv("TRUSTED_HOSTS", trusted)
    else:
        monkeypatch.delenv("TRUSTED_HOSTS", raising=False)
    app = make_app(APP_ENV=env, SECRET_KEY=KEY if env == "production" else None)
    response = app.test_client().get("/orders/new", base_url=f"http://{host}")
    assert response.status_code == (200 if served else 400)
    if not served:
        assert 'name="form_token"' not in response.text


def test_behind_a_tls_proxy_the_form_posts_only_with_our_own_https_referer(make_app, servers):
    client = make_app(TRUSTED_PROXIES=1).test_client()
    client.environ_base["HTTP_X_FORWARDED_PROTO"] = "https"
    tokens = open_form(client)
    # no Referer: Flask-WTF's HTTPS check applies
    refused = submit(client, tokens, **{})
    assert refused.status_code == 400 and order_count(servers) == 0
    placed = client.post(
        "/orders", data={**VALID, **tokens}, headers={"Referer": "https://localhost/orders/new"}
    )
    assert placed.status_code == 303 and order_count(servers) == 1


def production(**settings: str) -> dict:
    environ = {
        "APP_ENV": "production",
        "DATABASE_URL": "postgresql+psycopg://u@h/db",
        "REDIS_URL": "redis://h:6379/0",
        **settings,
    }
    config = from_environ(environ)
    finish(config)
    return config


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"SECRET_KEY": KEY, "TRUSTED_PROXIES": "one"}, "must be a number"),
        (
            {"SECRET_KEY": KEY, "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE": "-1"},
            "must not be negative",
        ),
        (
            {"SECRET_KEY": KEY, "MAX_FORMS_PER_CLIENT_PER_MINUTE": "40"},
            "renamed: set SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE",
        ),
        # One value for several secrets: whoever holds the metrics token signs sessions.
        (
            {"SECRET_KEY": KEY, "PAYMENT_WEBHOOK_SECRET": KEY, "METRICS_TOKEN": KEY},
            "^SECRET_KEY and PAYMENT_WEBHOOK_SECRET are the same value",
        ),
        ({"SECRET_KEY": KEY, "METRICS_TOKEN": KEY}, "^SECRET_KEY and METRICS_TOKEN are the same"),
        (
            {"SECRET_KEY": KEY, "PAYMENT_WEBHOOK_SECRET": OTHER, "METRICS_TOKEN": f" {OTHER}\n"},
            "^PAYMENT_WEBHOOK_SECRET and METRICS_TOKEN are the same",
            # padding is not key
        ),
    ],
)
def test_production_refuses_bad_settings(settings, message):
    with pytest.raises(RuntimeError, match=message) as refused:
        production(**settings)
    assert KEY not in str(refused.value) and OTHER not in str(refused.value)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("SECRET_KEY", "short", "is 5 bytes; production needs at least 32"),
        ("SECRET_KEY", "x" * 31, "at least 32"),
        # whitespace: nothing left
        ("SECRET_KEY", " " * 40, "is 0 bytes"),
        # padding is not key
        ("SECRET_KEY", "  5ba04ae7cb81729782fa2891454785  \n", "is 30 bytes"),
        ("SECRET_KEY", "a" * 40, "one character repeated"),
        ("SECRET_KEY", DEV_SECRET_KEY, "development secret"),
        ("SECRET_KEY", f"prod-{DEV_SECRET_KEY}-2024-rotated", "development secret"),
        # anyone could sign "paid"
        ("PAYMENT_WEBHOOK_SECRET", "a", "at least 32"),
        ("PAYMENT_WEBHOOK_SECRET", "\t" * 40, "is 0 bytes"),
        ("PAYMENT_WEBHOOK_SECRET", "z" * 64, "one character repeated"),
        ("PAYMENT_WEBHOOK_SECRET", DEV_WEBHOOK_SECRET, "development secret"),
        ("PAYMENT_WEBHOOK_SECRET", f"{DEV_WEBHOOK_SECRET}-{DEV_WEBHOOK_SECRET}", "development"),
        ("METRICS_TOKEN", "1", "at least 32"),
        ("METRICS_TOKEN", "m" * 40, "one character repeated"),
        ("METRICS_TOKEN", DEV_SECRET_KEY * 2, "development secret"),
        ("METRICS_TOKEN", DEV_WEBHOOK_SECRET.upper() * 2, "development secret"),
        # Long enough, but a pattern or a handful of characters: a guess away.
        ("SECRET_KEY", "password" * 4, "repeats a pattern of 8 characters"),
        ("SECRET_KEY", "ab" * 16, "repeats a pattern of 2 characters"),
        (
            "SECRET_KEY",
            "x" * 31 + "y",
            "has only 2 different characters; production needs at least 10",
        ),
        ("PAYMENT_WEBHOOK_SECRET", "0123456789abcdef" * 2, "pattern of 16 characters"),
        # not whole repeats
        ("PAYMENT_WEBHOOK_SECRET", "abcdefghijk" * 3 + "abc", "pattern of 11"),
        ("METRICS_TOKEN", "password" * 4, "pattern of 8"),
        ("METRICS_TOKEN", "abcdefgh" + "i" * 24, "has only 9 different characters"),
    ],
)
def test_production_refuses_a_weak_secret_and_names_it_without_showing_it(name, value, message):
    with pytest.raises(RuntimeError, match=f"^{name} .*{message}") as refused:
        production(**{"SECRET_KEY": KEY, name: value})
    if len(value.strip()) >= 8:
        assert value.strip() not in str(refused.value)


def test_production_starts_with_its_own_secrets_and_the_app_refuses_them_too(servers):
    config = production(
        SECRET_KEY=KEY,
        PAYMENT_WEBHOOK_SECRET=f"whsec_{secrets.token_urlsafe(24)}",
        METRICS_TOKEN=secrets.token_hex(32),
    )
    assert config["SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"] == 120
    assert config["TRUSTED_PROXIES"] == 0
    with pytest.raises(RuntimeError, match="at least 32"):
        create_app(servers.config(APP_ENV="production", SECRET_KEY="short"))


@pytest.mark.parametrize("env", ["development", "testing"])
def test_development_secrets_only_outside_production(make_app, env):
    app = make_app(APP_ENV=env, SECRET_KEY=None)
    assert app.config["SECRET_KEY"] == DEV_SECRET_KEY
    assert app.config["PAYMENT_WEBHOOK_SECRET"] == DEV_WEBHOOK_SECRET
