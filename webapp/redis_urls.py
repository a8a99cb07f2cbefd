"""The shop's Redis clients, from a URL that names a single server, a Cluster or Sentinels.

    redis://host:6379/0                          one server (rediss:// for TLS)
    redis+cluster://host1:6379,host2:6379        Redis Cluster: any reachable nodes to start from
    rediss+cluster://...                         the same over TLS
    redis+sentinel://s1:26379,s2:26379/mymaster/0  the master that Sentinels call "mymaster", db 0

Every command the app sends touches exactly one key (SET on render, GETDEL on
submit), so a Cluster needs no hash tags: any slot layout works. Sentinel gives
a client that asks the Sentinels where the master is and follows a failover.
Credentials go in the URL's user-info part as usual (``redis://:password@host``).

:func:`make_client` makes the app's client, which it hands to Flask-Submit-Once
(``submit_once.init_app(app, client=...)``); :func:`make_async_client` reads the same
URLs into redis.asyncio's clients (``Redis``, ``cluster.RedisCluster``,
``sentinel.Sentinel``) for the refund worker.
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import SplitResult, unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

__all__ = ["SCHEMES", "check_url", "make_async_client", "make_client"]

#: Every scheme :func:`make_client` accepts.
SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel")

#: Bounded waits: a dead Redis costs a request two seconds, never a hung worker.
TIMEOUTS: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


def make_client(url: str) -> redis.Redis | RedisCluster:
    """A client (one connection pool, shared by threads) for ``url``.

    Raises :class:`RuntimeError` that says what is wrong with a URL it cannot use.
    """
    parts = _checked(url)
    if parts.scheme.endswith("+cluster"):
        return _cluster(parts)
    if parts.scheme == "redis+sentinel":
        return _sentinel_master(parts)
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30, **TIMEOUTS)


def make_async_client(url: str) -> aioredis.Redis | AsyncRedisCluster:
    """The asyncio client for ``url``: the same URLs, checks and timeouts as
    :func:`make_client`. Close it with ``await client.aclose()``."""
    parts = _checked(url)
    if parts.scheme.endswith("+cluster"):
        _cluster_database(parts)
        nodes = [AsyncClusterNode(host, port) for host, port in _nodes(parts.netloc, 6379)]
        return AsyncRedisCluster(
            startup_nodes=nodes,
            decode_responses=True,
            ssl=parts.scheme.startswith("rediss"),
            **_credentials(parts.netloc),
            **TIMEOUTS,
        )
    if parts.scheme == "redis+sentinel":
        service, db = _sentinel_service(parts)
        sentinel = AsyncSentinel(  # type: ignore[no-untyped-call]
            _nodes(parts.netloc, 26379),
            sentinel_kwargs=dict(TIMEOUTS),
            decode_responses=True,
            **TIMEOUTS,
            **_credentials(parts.netloc),
        )
        return cast(aioredis.Redis, sentinel.master_for(service, db=db))
    return aioredis.Redis.from_url(url, decode_responses=True, health_check_interval=30, **TIMEOUTS)


def check_url(url: str) -> None:
    """Raise the :class:`RuntimeError` :func:`make_client` would, without making a
    client: for a process that checks its settings before it starts."""
    parts = _checked(url)
    if parts.scheme.endswith("+cluster"):
        _cluster_database(parts)
    elif parts.scheme == "redis+sentinel":
        _sentinel_service(parts)


def _checked(url: str) -> SplitResult:
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise RuntimeError(
            f"REDIS_URL scheme {parts.scheme!r} is not one of "
            f"{', '.join(SCHEMES)} (e.g. redis://host:6379/0)."
        )
    return parts


def _nodes(netloc: str, default_port: int) -> list[tuple[str, int]]:
    hosts = netloc.rpartition("@")[2]
    nodes = []
    for item in filter(None, hosts.split(",")):
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        nodes.append((host.strip("[]"), int(port) if port else default_port))
    if not nodes:
        raise RuntimeError("REDIS_URL names no host (e.g. redis+cluster://host:6379).")
    return nodes


def _credentials(netloc: str) -> dict[str, Any]:
    userinfo = netloc.rpartition("@")[0]
    if not userinfo:
        return {}
    user, _, password = userinfo.partition(":")
    return {k: unquote(v) for k, v in (("username", user), ("password", password)) if v}


def _cluster_database(parts: SplitResult) -> None:
    if parts.path.strip("/") not in ("", "0"):
        raise RuntimeError("A Redis Cluster has only database 0; drop the /db from REDIS_URL.")


def _cluster(parts: SplitResult) -> RedisCluster:
    _cluster_database(parts)
    # redis-py leaves ClusterNode, Sentinel and master_for unannotated.
    nodes = [
        ClusterNode(host, port)  # type: ignore[no-untyped-call]
        for host, port in _nodes(parts.netloc, 6379)
    ]
    return RedisCluster(
        startup_nodes=nodes,
        decode_responses=True,
        ssl=parts.scheme.startswith("rediss"),
        **_credentials(parts.netloc),
        **TIMEOUTS,
    )


def _sentinel_service(parts: SplitResult) -> tuple[str, int]:
    service, _, db = parts.path.strip("/").partition("/")
    if not service:
        raise RuntimeError(
            "redis+sentinel:// needs the master's name: redis+sentinel://host:26379/mymaster/0"
        )
    return service, int(db or 0)


def _sentinel_master(parts: SplitResult) -> redis.Redis:
    service, db = _sentinel_service(parts)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        _nodes(parts.netloc, 26379),
        sentinel_kwargs=dict(TIMEOUTS),
        decode_responses=True,
        **TIMEOUTS,
        **_credentials(parts.netloc),
    )
    master = sentinel.master_for(service, db=db)  # type: ignore[no-untyped-call]
    return cast(redis.Redis, master)
