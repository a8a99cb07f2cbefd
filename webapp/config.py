"""Configuration from the environment, checked once at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

# The rules production secrets follow are the worker's too: one module for both.
from . import mail
from .secret_rules import DEV_PROVIDER_SECRET, DEV_SECRET_KEY, refuse_weak_secrets

#: The Host names development answers unless TRUSTED_HOSTS says otherwise.
DEV_HOSTS = ("localhost", "127.0.0.1")
#: Form views per client address per minute (SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE).
FORMS_PER_CLIENT_PER_MINUTE = 120

#: The largest refund photo accepted (REFUND_PHOTO_MAX_BYTES), by default.
REFUND_PHOTO_MAX_BYTES = 5 * 1024 * 1024

ENVIRONMENTS = ("production", "development", "testing")

#: Flask-Submit-Once 1.0's name of each setting the shop once knew by another.
_NOW = {
    "TTL": "SUBMIT_ONCE_TTL_SECONDS",
    "WAIT_SECONDS": "SUBMIT_ONCE_WAIT_SECONDS",
    "MAX_PER_SESSION": "SUBMIT_ONCE_MAX_FORMS_PER_SESSION",
    "MAX_PER_CLIENT_PER_MINUTE": "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE",
    "REDIS_DOWN_FALLBACK": "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS",
    "SIGNED_WHEN_REDIS_AWAY": "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS",
}

#: ``DATABASE_POOLER``: what stands between the shop and PostgreSQL. ``none``: nothing;
#: ``session``: a pooler that lends a server connection for a client's whole connection
#: (PgBouncer's pool_mode = session); ``transaction``: one that lends it for a transaction
#: (pool_mode = transaction, as most hosted PostgreSQL is reached).
POOLERS = ("none", "session", "transaction")

#: Settings that were renamed: set in the environment or the config, they stop start-up.
RENAMED = {
    "FORM_TOKEN_TTL": _NOW["TTL"],
    "SUBMIT_WAIT_SECONDS": _NOW["WAIT_SECONDS"],
    "MAX_FORMS_PER_SESSION": _NOW["MAX_PER_SESSION"],
    "REDIS_DOWN_FALLBACK": _NOW["REDIS_DOWN_FALLBACK"],
    "MAX_FORMS_PER_CLIENT_PER_MINUTE": _NOW["MAX_PER_CLIENT_PER_MINUTE"],
    # Flask-Submit-Once 0.9's names (FORM_TOKENS_*), then 0.10's (SUBMIT_ONCE_*).
    **{f"FORM_TOKENS_{old}": new for old, new in _NOW.items() if old != "SIGNED_WHEN_REDIS_AWAY"},
    **{f"SUBMIT_ONCE_{old}": new for old, new in _NOW.items() if old != "WAIT_SECONDS"},
}


def from_environ(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Settings read from ``environ`` (see the table in README.md)."""
    env = environ.get("APP_ENV", "production")
    refuse_renamed(environ)
    config: dict[str, Any] = {
        "APP_ENV": env,
        "SECRET_KEY": environ.get("SECRET_KEY"),
        "DATABASE_URL": environ.get("DATABASE_URL"),
        "DATABASE_POOLER": environ.get("DATABASE_POOLER", ""),
        "REDIS_URL": environ.get("REDIS_URL"),
        # The SUBMIT_ONCE_* settings are Flask-Submit-Once's own keys.
        "SUBMIT_ONCE_TTL_SECONDS": _int(environ, "SUBMIT_ONCE_TTL_SECONDS", 3600),
        "SUBMIT_ONCE_WAIT_SECONDS": number(environ, "SUBMIT_ONCE_WAIT_SECONDS", 10.0),
        # How long a worker killed in a card charge holds it up (its lease runs out).
        "SUBMIT_ONCE_STEP_LEASE_SECONDS": number(
            environ, "SUBMIT_ONCE_STEP_LEASE_SECONDS", 30.0, minimum=0.1
        ),
        # Forms keep working while Redis is away (docs/SECURITY.md, "Redis away").
        "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS": _bool(
            environ, "SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS", True
        ),
        "SUBMIT_ONCE_MAX_FORMS_PER_SESSION": _int(
            environ, "SUBMIT_ONCE_MAX_FORMS_PER_SESSION", 200
        ),
        "MAX_CONTENT_LENGTH": _int(environ, "MAX_CONTENT_LENGTH", 64 * 1024),
        # The refund submit alone may send this much more: a photo (webapp/refunds/photos.py).
        "REFUND_PHOTO_MAX_BYTES": _int(environ, "REFUND_PHOTO_MAX_BYTES", REFUND_PHOTO_MAX_BYTES),
        "IDEMPOTENCY_RETENTION": _int(environ, "IDEMPOTENCY_RETENTION", 24 * 3600),
        "PAYMENT_WEBHOOK_SECRET": environ.get("PAYMENT_WEBHOOK_SECRET"),
        "PAYMENT_PROVIDER_URL": environ.get("PAYMENT_PROVIDER_URL") or None,
        "PAYMENT_PROVIDER_SECRET": environ.get("PAYMENT_PROVIDER_SECRET") or None,
        "PAYMENT_PROVIDER_TIMEOUT": number(environ, "PAYMENT_PROVIDER_TIMEOUT", 10.0, minimum=0.1),
        "PAYMENT_PROVIDER_RETRIES": _int(environ, "PAYMENT_PROVIDER_RETRIES", 2),
        "METRICS_TOKEN": environ.get("METRICS_TOKEN") or None,
        # Mail (webapp/mail.py): the backend follows APP_ENV unless set.
        "MAIL_BACKEND": environ.get("MAIL_BACKEND") or None,
        "MAIL_SMTP_URL": environ.get("MAIL_SMTP_URL") or None,
        "MAIL_FROM": environ.get("MAIL_FROM") or None,
        "TRUSTED_PROXIES": _int(environ, "TRUSTED_PROXIES", 0),
    }
    if hosts := [
        host.strip() for host in environ.get("TRUSTED_HOSTS", "").split(",") if host.strip()
    ]:
        # Flask's own setting: another Host is a 400
        config["TRUSTED_HOSTS"] = hosts
    if environ.get("SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS", "").strip():
        # Unset, finish() makes it follow SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS.
        config["SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS"] = _bool(
            environ, "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS", False
        )
    if environ.get("SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"):
        config["SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE"] = _int(
            environ, "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE", FORMS_PER_CLIENT_PER_MINUTE
        )
    if environ.get("SAME_ORDER_WINDOW_SECONDS"):
        # The same order again from one browser session is asked about (orders/same_order.py).
        config["SAME_ORDER_WINDOW_SECONDS"] = _int(environ, "SAME_ORDER_WINDOW_SECONDS", 600)
    if environ.get("CARD_CHECKS_PER_SESSION"):
        # Card checks at the provider per browser session (webapp/payments/card_checks.py).
        config["CARD_CHECKS_PER_SESSION"] = _int(environ, "CARD_CHECKS_PER_SESSION", 10)
    if environ.get("CATALOGUE_CACHE_SECONDS"):
        # Unset, finish() picks the default for the environment the app ends up in.
        config["CATALOGUE_CACHE_SECONDS"] = number(environ, "CATALOGUE_CACHE_SECONDS", 5.0)
    return config


def finish(config: dict[str, Any]) -> None:
    """Fill in derived settings and refuse a configuration that is unsafe or incomplete."""
    env = config["APP_ENV"]
    refuse_renamed(config)
    if env not in ENVIRONMENTS:
        raise RuntimeError(f"APP_ENV={env!r} is not one of {', '.join(ENVIRONMENTS)}.")
    if not config.get("SECRET_KEY"):
        if env == "production":
            raise RuntimeError(
                "SECRET_KEY is not set. Generate one with\n"
                "  python -c 'import secrets; print(secrets.token_hex(32))'\n"
                "and export it as SECRET_KEY (or set APP_ENV=development on your own machine)."
            )
        config["SECRET_KEY"] = DEV_SECRET_KEY
    if env == "production":
        refuse_weak_secrets(config)
    for name, example in (
        ("DATABASE_URL", "postgresql+psycopg://user:pass@host/db"),
        ("REDIS_URL", "redis://host:6379/0"),
    ):
        if not config.get(name):
            raise RuntimeError(
                f"{name} is not set. Export it (e.g. {name}={example}), "
                "or start the app with scripts/run, which starts embedded servers."
            )
    config["DATABASE_POOLER"] = check_pooler(config.get("DATABASE_POOLER") or "")
    # Tests change the catalogue between requests and expect to see it at once; the
    # default must follow APP_ENV even when that comes from create_app's test_config.
    config.setdefault("CATALOGUE_CACHE_SECONDS", 0.0 if env == "testing" else 5.0)
    # Off in testing: suites place many card orders from one session on purpose.
    config.setdefault("CARD_CHECKS_PER_SESSION", 0 if env == "testing" else 10)
    # Off in testing: suites place the same order from one session on purpose.
    config.setdefault("SAME_ORDER_WINDOW_SECONDS", 0 if env == "testing" else 600)
    # Tests open hundreds of forms from one address (127.0.0.1): off there unless a
    # test turns it on.
    config.setdefault(
        "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE",
        0 if env == "testing" else FORMS_PER_CLIENT_PER_MINUTE,
    )
    # A form drawn before an outage is sent during it too: while Redis is away the lock and
    # the UNIQUE column decide for its token as for the signed ones (docs/SECURITY.md).
    config.setdefault(
        "SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS",
        bool(config.get("SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS")),
    )
    if env == "development" and config.get("TRUSTED_HOSTS") is None:
        # scripts/run serves 127.0.0.1 with the public webhook secret: a page whose
        # name is rebound to 127.0.0.1 (DNS rebinding) must not be answered.
        config["TRUSTED_HOSTS"] = list(DEV_HOSTS)
    config.setdefault("TRUSTED_PROXIES", 0)
    payment_provider(config)
    mail.check_settings(config)
    if not isinstance(config["TRUSTED_PROXIES"], int) or config["TRUSTED_PROXIES"] < 0:
        raise RuntimeError("TRUSTED_PROXIES must be a whole number of proxies (0 or more).")
    config.update(
        TESTING=env == "testing",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=env == "production",
        # Back shows a placed order's form as it was sent (Flask-Submit-Once's opt-in).
        SUBMIT_ONCE_BACK_SHOWS_FORM=True,
    )
    # A refund photo refused for its size is not kept for the form drawn again either.
    config.setdefault("REFUND_PHOTO_MAX_BYTES", REFUND_PHOTO_MAX_BYTES)
    config.setdefault("SUBMIT_ONCE_MAX_KEPT_UPLOAD_BYTES", config["REFUND_PHOTO_MAX_BYTES"])
    # A CSRF token lives as long as the form token it travels with.
    config.setdefault("WTF_CSRF_TIME_LIMIT", config.get("SUBMIT_ONCE_TTL_SECONDS", 3600))


def payment_provider(config: dict[str, Any]) -> None:
    """The card provider's settings: none (the checkout charges no card), or a URL and its
    secret; production wants HTTPS, except to a provider on this machine."""
    for name, default in (
        ("PAYMENT_PROVIDER_URL", None),
        ("PAYMENT_PROVIDER_SECRET", None),
        ("PAYMENT_PROVIDER_TIMEOUT", 10.0),
        ("PAYMENT_PROVIDER_RETRIES", 2),
    ):
        config.setdefault(name, default)
    url = config["PAYMENT_PROVIDER_URL"]
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RuntimeError(f"PAYMENT_PROVIDER_URL must be an http(s) URL, got {url!r}.")
    if (
        config["APP_ENV"] == "production"
        and parts.scheme != "https"
        and parts.hostname not in DEV_HOSTS
    ):
        raise RuntimeError(
            "PAYMENT_PROVIDER_URL must use https:// in production (card "
            "payments and the provider's secret travel on it)."
        )
    if not config["PAYMENT_PROVIDER_SECRET"]:
        if config["APP_ENV"] == "production":
            raise RuntimeError(
                "PAYMENT_PROVIDER_URL is set but PAYMENT_PROVIDER_SECRET is "
                "not: set the secret key your payment provider gave you."
            )
        config["PAYMENT_PROVIDER_SECRET"] = DEV_PROVIDER_SECRET


def check_pooler(value: str) -> str:
    """``DATABASE_POOLER`` checked (empty: ``none``); RuntimeError names the choices."""
    value = value.strip().lower() or "none"
    if value not in POOLERS:
        raise RuntimeError(f"DATABASE_POOLER must be one of {', '.join(POOLERS)}, got {value!r}.")
    return value


def refuse_renamed(settings: Mapping[str, Any]) -> None:
    """Stop start-up on a setting's old name, naming the new one."""
    for old, new in RENAMED.items():
        if old in settings:
            raise RuntimeError(f"{old} was renamed: set {new} instead.")


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = number(environ, name, default)
    if value != int(value):
        raise RuntimeError(f"{name} must be a whole number, got {environ[name]!r}.")
    return int(value)


def _bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise RuntimeError(f"{name} must be true or false, got {environ[name]!r}.")


def number(environ: Mapping[str, str], name: str, default: float, minimum: float = 0) -> float:
    """``environ[name]`` as a number of at least ``minimum``, or ``default`` when unset;
    anything else stops start-up with a message naming the variable."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise RuntimeError(f"{name} must be a number, got {raw!r}.") from None
    if value < minimum:
        bound = "must not be negative" if minimum == 0 else f"must be at least {minimum:g}"
        raise RuntimeError(f"{name} {bound}, got {raw!r}.")
    return value
