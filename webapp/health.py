"""Liveness and readiness for load balancers and orchestrators.

    GET /healthz   liveness: 200 while this process serves requests. The body also
                   says whether Redis answers, for people looking, but the status
                   stays 200: restarting app processes does not bring Redis back,
                   and a liveness probe that fails with a dependency restarts them all.
    GET /readyz    readiness: 200 when Redis and PostgreSQL both answer, else 503;
                   the JSON body says which check failed. A load balancer should send
                   traffic only to ready instances.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from flask import Blueprint, jsonify
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from .db import sessions
from .extensions import submit_once

bp = Blueprint("health", __name__)

NO_STORE = {"Cache-Control": "no-store"}


def check_redis() -> None:
    """Raises unless the app's Redis answers PING."""
    if not submit_once.redis.ping():
        raise RedisError("PING was not answered")


def check_postgres() -> None:
    """Raises unless PostgreSQL runs a trivial query."""
    with sessions()() as db:
        db.execute(text("SELECT 1"))


def probe(check: Callable[[], None]) -> dict[str, object]:
    """Run one check; its result with how long it took (never raises for a dependency)."""
    started = time.perf_counter()
    try:
        check()
        result: dict[str, object] = {"status": "up"}
    except (RedisError, SQLAlchemyError, OSError) as error:
        result = {"status": "down", "error": type(error).__name__}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


@bp.get("/healthz")
def healthz():
    redis = probe(check_redis)
    status = "ok" if redis["status"] == "up" else "degraded"
    return jsonify(status=status, checks={"redis": redis}), 200, NO_STORE


@bp.get("/readyz")
def readyz():
    checks = {"redis": probe(check_redis), "postgres": probe(check_postgres)}
    ready = all(check["status"] == "up" for check in checks.values())
    return (jsonify(status="ready" if ready else "unavailable", checks=checks),
            200 if ready else 503, NO_STORE)
