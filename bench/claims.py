"""The claim step alone, on the same Redis: ours against lock-and-cache.

Ours (``TokenStore.consume_digest``, flask-submit-once/src/flask_submit_once/_tokens.py)::

    GETDEL ft:<digest>                       1 round trip; the winner is whoever gets a value

Lock-and-cache (the common pattern in the background article)::

    GET result:<key>                         nothing cached yet
    SET lock:<key> 1 NX EX 30                the winner takes the lock
    ... work ...
    SETEX result:<key> 86400 <result>        cache the result for later duplicates
                                             3 round trips for the first request

Powertools for AWS Lambda (``aws-lambda-powertools[redis]``), its idempotency
utility on its Redis persistence layer::

    SET <fn>#<hash of payload> {"status": "INPROGRESS", ...} NX EX   the winner
    ... work ...
    SET <fn>#<hash> {"status": "COMPLETED", "data": ...} EX        cache the result

Each is run with a fresh key per claim (the first-submit path), first one at a
time on one connection (latency-bound), then from several threads.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import threading
import time
import warnings
from collections.abc import Callable

import redis

from flask_submit_once import TokenStore
from webapp.redis_urls import make_client

from .servers import redis_calls

Claim = Callable[[str], bool]


def ours(client: redis.Redis) -> Claim:
    return TokenStore(client, prefix="ft").consume_digest


def lock_and_cache(client: redis.Redis) -> Claim:
    def claim(key: str) -> bool:
        if client.get(f"result:{key}") is not None:
            return False
        if not client.set(f"lock:{key}", 1, nx=True, ex=30):
            return False
        client.setex(f"result:{key}", 86400, "order-id")
        return True

    return claim


def powertools(client: redis.Redis) -> Claim:
    # the key prefix it uses
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", "bench")
    # Outside Lambda there is no remaining time to read; it says so on every call.
    warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.redis import (
        RedisCachePersistenceLayer,
    )

    layer = RedisCachePersistenceLayer(client=client)
    ran: list[str] = []

    @idempotent_function(
        data_keyword_argument="order",
        persistence_store=layer,
        config=IdempotencyConfig(expires_after_seconds=86400),
    )
    def place(order: dict) -> str:
        ran.append(order["key"])
        return "order-id"

    def claim(key: str) -> bool:
        before = len(ran)
        place(order={"key": key})
        return len(ran) > before

    return claim


PATTERNS = {
    "GETDEL (ours)": ours,
    "GET + SET NX + SETEX": lock_and_cache,
    "Powertools idempotency (Redis)": powertools,
}


def _claim_all(claim: Claim, keys: list[str]) -> None:
    for key in keys:
        claim(key)


def _issue(client: redis.Redis, keys: list[str]) -> None:
    """Tokens issued beforehand, untimed (only ours reads them)."""
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.set(f"ft:{key}", 1, ex=600)
        pipe.execute()


def measure(url: str, claims: int = 5000, threads: int = 8) -> list[dict]:
    """Round trips per claim and claims/s for each pattern, one after the other."""
    rows = []
    for name, make in PATTERNS.items():
        if make is powertools and importlib.util.find_spec("aws_lambda_powertools") is None:
            # not installed (only the bench extra has it): the peer is left out
            continue
        client = make_client(url)
        claim = make(client)
        keys = [secrets.token_urlsafe(32) for _ in range(claims)]
        _issue(client, keys)
        # warm-up: imports, the connection
        claim(secrets.token_urlsafe(32))
        before = sum(redis_calls(client).values())
        started = time.perf_counter()
        won = sum(claim(key) for key in keys)
        serial = claims / (time.perf_counter() - started)
        round_trips = (sum(redis_calls(client).values()) - before) / claims

        keys = [secrets.token_urlsafe(32) for _ in range(claims)]
        _issue(client, keys)
        # one pool, shared by the threads
        shared = make_client(url)
        claim = make(shared)
        chunks = [keys[i::threads] for i in range(threads)]
        workers = [threading.Thread(target=_claim_all, args=(claim, chunk)) for chunk in chunks]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        parallel = claims / (time.perf_counter() - started)
        rows.append(
            {
                "pattern": name,
                "round_trips": round_trips,
                "won": won,
                "claims": claims,
                "serial_per_s": serial,
                "threads": threads,
                "parallel_per_s": parallel,
            }
        )
        client.flushdb()
        client.close()
        shared.close()
    return rows
