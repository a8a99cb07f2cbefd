"""The claim step alone, on the same Redis: ours against lock-and-cache.

Ours (submit_once/tokens.py)::

    GETDEL ft:<digest>                       1 round trip; the winner is whoever gets a value

Lock-and-cache (the common pattern in the background article)::

    GET result:<key>                         nothing cached yet
    SET lock:<key> 1 NX EX 30                the winner takes the lock
    ... work ...
    SETEX result:<key> 86400 <result>        cache the result for later duplicates
                                             3 round trips for the first request

Both are run with a fresh key per claim (the first-submit path), first one at a
time on one connection (latency-bound), then from several threads.
"""

from __future__ import annotations

import secrets
import threading
import time

import redis


def ours(client: redis.Redis, key: str) -> bool:
    return client.getdel(f"ft:{key}") is not None


def lock_and_cache(client: redis.Redis, key: str) -> bool:
    if client.get(f"result:{key}") is not None:
        return False
    if not client.set(f"lock:{key}", 1, nx=True, ex=30):
        return False
    client.setex(f"result:{key}", 86400, "order-id")
    return True


PATTERNS = {"GETDEL (ours)": ours, "GET + SET NX + SETEX": lock_and_cache}


def _commands(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info",))


def _claim_all(claim, client: redis.Redis, keys: list[str]) -> None:
    for key in keys:
        claim(client, key)


def measure(url: str, claims: int = 5000, threads: int = 8) -> list[dict]:
    """Round trips per claim and claims/s for each pattern, one after the other."""
    rows = []
    for name, claim in PATTERNS.items():
        client = redis.Redis.from_url(url)
        keys = [secrets.token_urlsafe(32) for _ in range(claims)]
        with client.pipeline(transaction=False) as pipe:  # tokens issued beforehand, untimed
            for key in keys:
                pipe.set(f"ft:{key}", 1, ex=600)
            pipe.execute()
        before = _commands(client)
        started = time.perf_counter()
        won = sum(claim(client, key) for key in keys)
        serial = claims / (time.perf_counter() - started)
        round_trips = (_commands(client) - before - 1) / claims  # -1: the INFO itself

        keys = [secrets.token_urlsafe(32) for _ in range(claims)]
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(f"ft:{key}", 1, ex=600)
            pipe.execute()
        shared = redis.Redis.from_url(url, max_connections=threads)
        chunks = [keys[i::threads] for i in range(threads)]
        workers = [threading.Thread(target=_claim_all, args=(claim, shared, chunk))
                   for chunk in chunks]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        parallel = claims / (time.perf_counter() - started)
        rows.append({"pattern": name, "round_trips": round_trips, "won": won, "claims": claims,
                     "serial_per_s": serial, "threads": threads, "parallel_per_s": parallel})
        client.flushdb()
        client.close()
        shared.close()
    return rows
