"""The refund worker's settings, from the environment, checked at start-up."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import ENVIRONMENTS, check_pooler, number
from ..db import libpq_url
from ..redis_urls import check_url
from ..secret_rules import refuse_weak_secrets

__all__ = ["WorkerSettings", "monitor_bind"]


@dataclass(frozen=True)
class WorkerSettings:
    database_url: str
    redis_url: str
    consumer: str
    #: DATABASE_POOLER, as the app reads it (webapp/config.py).
    database_pooler: str = "none"
    #: Where the relay LISTENs: DATABASE_LISTEN_URL, else DATABASE_URL unless that goes
    #: through a pooler by transaction (whose server connections are lent per transaction,
    #: so a LISTEN hears nothing); None: the relay only polls.
    listen_url: str | None = None
    batch: int = 50
    concurrency: int = 8
    block_ms: int = 1000
    claim_idle_ms: int = 30_000
    max_deliveries: int = 5
    grace_seconds: float = 10.0
    lock_timeout_ms: int = 5000
    relay_poll_seconds: float = 2.0
    trim_seconds: float = 1.0
    stream_max: int = 2000
    dead_letters_max: int = 10_000
    #: Where /healthz and /metrics are served (host, port); None: not served.
    monitor_bind: tuple[str, int] | None = None
    metrics_token: str | None = None
    #: How often the worker finishes the card charges submits left (0: never; cron's
    #: ``flask submit-once resume`` does the same).
    charge_sweep_seconds: float = 30.0
    #: APP_ENV, as the app reads it: in production /metrics needs METRICS_TOKEN.
    environment: str = "production"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> WorkerSettings:
        """Read the ``REFUND_*`` variables (see README.md); RuntimeError says what to fix.

        In production (``APP_ENV``, production unless set) the secrets it is given
        follow the app's rules (secret_rules.py): ``METRICS_TOKEN`` strong and none
        the same as ``SECRET_KEY`` or ``PAYMENT_WEBHOOK_SECRET``."""
        database_url, redis_url = environ.get("DATABASE_URL"), environ.get("REDIS_URL")
        if not database_url or not redis_url:
            raise RuntimeError(
                "The refund worker needs DATABASE_URL and REDIS_URL set "
                "(scripts/run sets both and starts the worker for you)."
            )
        # the app's URL forms: one server, Cluster, Sentinel
        check_url(redis_url)
        environment = environ.get("APP_ENV", "production")
        if environment not in ENVIRONMENTS:
            raise RuntimeError(f"APP_ENV={environment!r} is not one of {', '.join(ENVIRONMENTS)}.")
        if environment == "production":
            refuse_weak_secrets(environ)
        pooler = check_pooler(environ.get("DATABASE_POOLER", ""))
        listen_url = environ.get("DATABASE_LISTEN_URL") or (
            None if pooler == "transaction" else database_url
        )
        return cls(
            database_url=libpq_url(database_url),
            redis_url=redis_url,
            database_pooler=pooler,
            listen_url=libpq_url(listen_url) if listen_url else None,
            consumer=environ.get("REFUND_CONSUMER") or f"{socket.gethostname()}-{os.getpid()}",
            batch=int(number(environ, "REFUND_BATCH", cls.batch, minimum=1)),
            concurrency=int(number(environ, "REFUND_CONCURRENCY", cls.concurrency, minimum=1)),
            claim_idle_ms=int(number(environ, "REFUND_CLAIM_IDLE_MS", cls.claim_idle_ms)),
            max_deliveries=int(
                number(environ, "REFUND_MAX_DELIVERIES", cls.max_deliveries, minimum=1)
            ),
            grace_seconds=number(environ, "REFUND_GRACE_SECONDS", cls.grace_seconds),
            lock_timeout_ms=int(
                number(environ, "REFUND_LOCK_TIMEOUT_MS", cls.lock_timeout_ms, minimum=1)
            ),
            relay_poll_seconds=number(
                environ, "REFUND_RELAY_POLL_SECONDS", cls.relay_poll_seconds, minimum=0.05
            ),
            trim_seconds=number(environ, "REFUND_TRIM_SECONDS", cls.trim_seconds, minimum=0.05),
            stream_max=int(number(environ, "REFUND_STREAM_MAX", cls.stream_max, minimum=1)),
            dead_letters_max=int(
                number(environ, "REFUND_DEAD_LETTERS_MAX", cls.dead_letters_max, minimum=1)
            ),
            monitor_bind=monitor_bind(environ.get("REFUND_MONITOR_BIND", "")),
            metrics_token=environ.get("METRICS_TOKEN") or None,
            charge_sweep_seconds=number(environ, "CHARGE_SWEEP_SECONDS", cls.charge_sweep_seconds),
            environment=environment,
        )


def monitor_bind(value: str) -> tuple[str, int] | None:
    """``REFUND_MONITOR_BIND``: ``host:port``, or a port alone (on 127.0.0.1); empty: off."""
    value = value.strip()
    if not value:
        return None
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise RuntimeError(f"REFUND_MONITOR_BIND must be host:port or a port, got {value!r}.")
    return host, int(port)
