"""The worker refuses a bad environment at start-up, saying what to fix."""

from __future__ import annotations

import secrets
from dataclasses import fields, replace

import pytest

from webapp.refunds.settings import WorkerSettings

# in scripts/test --quick
pytestmark = pytest.mark.quick

URLS = {"DATABASE_URL": "postgresql+psycopg://u@h/db", "REDIS_URL": "redis://h:6379/0"}
KEY = secrets.token_hex(32)


def test_defaults_and_the_libpq_url():
    settings = WorkerSettings.from_environ({**URLS, "REFUND_CLAIM_IDLE_MS": "2500"})
    assert settings.database_url == "postgresql://u@h/db"
    assert settings.claim_idle_ms == 2500 and settings.max_deliveries == 5


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"REDIS_URL": "redis://h"}, "needs DATABASE_URL and REDIS_URL"),
        ({**URLS, "REFUND_MAX_DELIVERIES": "0"}, "REFUND_MAX_DELIVERIES must be at least 1"),
        ({**URLS, "REFUND_GRACE_SECONDS": "soon"}, "REFUND_GRACE_SECONDS must be a number"),
        ({**URLS, "REFUND_STREAM_MAX": "0"}, "REFUND_STREAM_MAX must be at least 1"),
        ({**URLS, "REFUND_DEAD_LETTERS_MAX": "0"}, "REFUND_DEAD_LETTERS_MAX must be at least 1"),
        ({**URLS, "REFUND_RELAY_POLL_SECONDS": "0"}, "REFUND_RELAY_POLL_SECONDS must be at least"),
        ({**URLS, "REDIS_URL": "memcached://h:11211"}, "scheme 'memcached' is not one of"),
        # The app's secret rules (webapp/secret_rules.py); APP_ENV unset is production.
        ({**URLS, "APP_ENV": "staging"}, "APP_ENV='staging' is not one of production"),
        ({**URLS, "METRICS_TOKEN": "x"}, "^METRICS_TOKEN is 1 bytes; production needs at least 32"),
        (
            {**URLS, "APP_ENV": "production", "METRICS_TOKEN": "ab" * 16},
            "^METRICS_TOKEN repeats a pattern of 2 characters",
        ),
        (
            {**URLS, "METRICS_TOKEN": "x" * 31 + "y"},
            "^METRICS_TOKEN has only 2 different characters",
        ),
        (
            {**URLS, "METRICS_TOKEN": KEY, "SECRET_KEY": KEY},
            "^SECRET_KEY and METRICS_TOKEN are the same value",
        ),
    ],
)
def test_bad_environment_is_refused_with_a_clear_message(environ, message):
    with pytest.raises(RuntimeError, match=message):
        WorkerSettings.from_environ(environ)


@pytest.mark.parametrize("env", ["development", "testing"])
def test_outside_production_any_metrics_token_will_do_as_in_the_app(env):
    settings = WorkerSettings.from_environ({**URLS, "APP_ENV": env, "METRICS_TOKEN": "x"})
    assert (settings.environment, settings.metrics_token) == (env, "x")


def test_the_worker_has_no_test_settings():
    """Pauses come from tests/refunds/paused_worker.py (receivers of the worker's
    signals); the product reads no TEST_* variable, in any environment."""
    plain = WorkerSettings.from_environ(URLS)
    for env in ("production", "testing"):
        assert WorkerSettings.from_environ(
            {**URLS, "APP_ENV": env, "TEST_REFUND_PAUSE_BEFORE_ACK": "5"}
        ) == replace(plain, consumer=plain.consumer, environment=env)
    assert not [f.name for f in fields(WorkerSettings) if "pause" in f.name]


@pytest.mark.parametrize(
    ("value", "bind"),
    [
        ("", None),
        ("9108", ("127.0.0.1", 9108)),
        ("0.0.0.0:9108", ("0.0.0.0", 9108)),
        ("[::1]:9108", ("::1", 9108)),
    ],
)
def test_the_monitor_is_off_unless_asked_and_a_bare_port_is_loopback(value, bind):
    environ = {**URLS, "REFUND_MONITOR_BIND": value}
    assert WorkerSettings.from_environ(environ).monitor_bind == bind


@pytest.mark.parametrize("value", ["localhost", "host:port", "70000", ":0"])
def test_a_bad_monitor_address_is_refused(value):
    with pytest.raises(RuntimeError, match="REFUND_MONITOR_BIND must be host:port"):
        WorkerSettings.from_environ({**URLS, "REFUND_MONITOR_BIND": value})
