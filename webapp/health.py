"""Liveness and readiness for load balancers and orchestrators.

GET /healthz   liveness: 200 while this process serves requests. The body says "ok",
               or "degraded" while Redis does not answer or this process draws forms
               with signed tokens, and then what is done otherwise meanwhile. The
               status stays 200: restarting app processes does not bring Redis back,
               and a liveness probe that fails with a dependency restarts them all.
GET /readyz    readiness: 200 when PostgreSQL answers and Redis answers ("ready"), or
               when forms are drawn without Redis (SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS,
               the shop's default: "degraded"); else 503. Redis is shared: were its
               outage a 503, the load balancer would take every instance out at once.
               The JSON body says which check failed. Send traffic only to ready
               instances.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from flask import Blueprint, Flask, current_app, jsonify
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from .db import sessions
from .extensions import submit_once

bp = Blueprint("health", __name__)

NO_STORE = {"Cache-Control": "no-store"}

#: What the shop does otherwise while Redis is away, as /healthz says it.
WHILE_REDIS_IS_AWAY = {
    "forms": "drawn with signed tokens; each submit is placed once by the database's lock "
    "and UNIQUE column alone; form limits are counted in each process",
    "refunds": "requests are taken and wait in PostgreSQL; the refund worker applies them "
    "once Redis answers",
}
API_WITH_FALLBACK = (
    "orders are placed once per Idempotency-Key by the database's lock and UNIQUE column alone"
)
API_WITHOUT_FALLBACK = (
    "POST /api/orders answers 503 with Retry-After and places nothing "
    "(SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS is off)"
)


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


def forms_without_redis() -> bool:
    """Whether forms are drawn while Redis is away (with signed tokens)."""
    return bool(current_app.config["SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS"])


def while_redis_is_away() -> dict[str, str]:
    """What each part of the shop does instead while Redis is away."""
    api = (
        API_WITH_FALLBACK
        if current_app.config["SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS"]
        else API_WITHOUT_FALLBACK
    )
    return {**WHILE_REDIS_IS_AWAY, "api": api}


@bp.get("/healthz")
def healthz():
    redis = probe(check_redis)
    # this process's last form was drawn without Redis
    signed = submit_once.degraded
    body: dict[str, object] = {
        "status": "ok",
        "checks": {"redis": redis},
        "forms": "signed" if signed else "redis",
    }
    if redis["status"] != "up" or signed:
        body["status"] = "degraded"
        if forms_without_redis():
            body["while_redis_is_away"] = while_redis_is_away()
    return jsonify(body), 200, NO_STORE


@bp.get("/readyz")
def readyz():
    checks = {"redis": probe(check_redis), "postgres": probe(check_postgres)}
    up = {name: check["status"] == "up" for name, check in checks.items()}
    if all(up.values()):
        status = "ready"
    elif up["postgres"] and forms_without_redis():
        status = "degraded"
    else:
        status = "unavailable"
    return (
        jsonify(status=status, checks=checks),
        503 if status == "unavailable" else 200,
        NO_STORE,
    )


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
