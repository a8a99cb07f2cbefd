"""The Redis client the extension makes from a URL: one server, one pool, bounded waits.

``redis://``, ``rediss://`` (TLS) and ``unix://`` URLs name one server. For a Redis
Cluster or Sentinel, make the redis-py client yourself (``RedisCluster(...)``,
``Sentinel(...).master_for(...)``) and hand it over: ``SubmitOnce(app, client=...)``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis

__all__ = ["TIMEOUTS", "client_for"]

#: A dead Redis costs a request two seconds, never a hung worker.
TIMEOUTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


def client_for(url: str | None) -> redis.Redis:
    """A client for a one-server ``url``, shared by threads, replies as ``str``."""
    if not url:
        raise RuntimeError(
            "SubmitOnce needs SUBMIT_ONCE_REDIS_URL (or REDIS_URL) set, or a "
            "client: SubmitOnce(app, client=redis.Redis(...))."
        )
    scheme = urlsplit(url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise RuntimeError(
            f"SUBMIT_ONCE_REDIS_URL: {scheme}:// is not a one-server URL "
            "(redis://, rediss://, unix://). For a Cluster or Sentinel, make "
            "the redis-py client and pass it: SubmitOnce(app, client=...)."
        )
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30, **TIMEOUTS)
