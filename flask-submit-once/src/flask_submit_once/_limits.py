"""Issuing bounded: counters per session and per client address, in the tokens' command.

Each limit is a counter per window of the clock, and the counters and the tokens' SETs
are one command, one round trip (a Cluster, whose keys live on different nodes, gets
them as one pipeline instead)::

    EVALSHA <issue> <token keys...> <counter keys...>
        GET each counter; one the new tokens would take over its limit: stop, nothing written
        INCRBY each counter (EXPIRE it with its first count)
        SET each token key 1 EX <ttl> NX

A count kept in a cookie is the client's to drop; these are kept in Redis, and the
client's address is counted as well as its session, so a flood of form views without
cookies cannot fill Redis either. Only digests of who is counted reach Redis.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from redis.cluster import RedisCluster

from ._tokens import TOKEN_BYTES, TokenStore

__all__ = ["IssueLimit", "Issuer", "LocalLimits", "TooManyIssued"]


@dataclass(frozen=True)
class IssueLimit:
    """At most ``most`` tokens per ``seconds`` for whoever ``who`` names (0: no limit).
    Windows are aligned to multiples of ``seconds``, so any span of ``seconds`` holds at
    most twice ``most``. ``uncounted``: tokens issued under it before its counter could
    be kept (a session's first page, before it had an id), added with this issue."""

    who: str
    most: int
    seconds: int = 60
    uncounted: int = 0


class TooManyIssued(Exception):
    """``limit`` refused the tokens; none was left behind."""

    def __init__(self, limit: IssueLimit, retry_after: int) -> None:
        super().__init__(f"too many tokens issued; retry after {retry_after} s")
        self.limit, self.retry_after = limit, retry_after


#: KEYS: the n tokens, then one counter per limit. ARGV[1] n, ARGV[2] the tokens' TTL,
#: then per limit its most, its counter's TTL and what to add. Returns 0 when the tokens
#: are set, the refusing limit's 1-based number, or -1 on the impossible collision. Every
#: limit is checked before anything is written; a script runs whole, so a counter never
#: lives without its TTL.
_ISSUE = """
local n = tonumber(ARGV[1])
local limits = #KEYS - n
for j = 1, limits do
  local count = tonumber(redis.call('GET', KEYS[n + j]) or '0')
  if count + tonumber(ARGV[3 * j + 2]) > tonumber(ARGV[3 * j]) then return j end
end
for j = 1, limits do
  local add = tonumber(ARGV[3 * j + 2])
  if redis.call('INCRBY', KEYS[n + j], add) == add then
    redis.call('EXPIRE', KEYS[n + j], ARGV[3 * j + 1])
  end
end
for i = 1, n do
  if not redis.call('SET', KEYS[i], '1', 'EX', ARGV[2], 'NX') then return -1 end
end
return 0
"""


class Issuer:
    """Issues a store's tokens under limits, one round trip a page."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        # EVALSHA, and SCRIPT LOAD again when Redis forgot it (a restart, a flush).
        self._script = store.client.register_script(_ISSUE)

    def issue_many(
        self, *, session_id: str, forms: Sequence[str], limits: Sequence[IssueLimit] = ()
    ) -> list[str]:
        """A token for each of ``forms`` (in order), counted against ``limits``, in one
        round trip. Over a limit, none is issued and :class:`TooManyIssued` says which
        limit and when its window ends."""
        store = self.store
        tokens = [secrets.token_urlsafe(TOKEN_BYTES) for _ in forms]
        keys = [
            store.key(store.digest(token, session_id=session_id, form=form))
            for token, form in zip(tokens, forms, strict=True)
        ]
        limits = [limit for limit in limits if limit.most > 0]
        if not keys:
            return tokens
        now = int(time.time())
        counters = _counters(store, limits, now, len(keys))
        if len(keys) == 1 and not counters:
            refused = 0 if store.client.set(keys[0], 1, ex=store.ttl, nx=True) else -1
        elif isinstance(store.client, RedisCluster):
            refused = _in_pipeline(store, keys, counters)
        else:
            refused = int(
                self._script(
                    keys=[*keys, *(counter for counter, *_ in counters)],
                    args=[
                        len(keys),
                        store.ttl,
                        *(n for _, most, life, add in counters for n in (most, life, add)),
                    ],
                )
            )
        if refused < 0:
            raise RuntimeError("token collision: the random source is broken")
        if refused:
            limit = limits[refused - 1]
            raise TooManyIssued(limit, retry_after=limit.seconds - now % limit.seconds)
        return tokens


def _counters(
    store: TokenStore, limits: Sequence[IssueLimit], now: int, tokens: int
) -> list[tuple[str, int, int, int]]:
    """(key, most, TTL, what to add) of each limit's counter for the window ``now`` is
    in. A counter lives two windows, so it never ends inside its own, and longer than any
    token of its window: under ``volatile-ttl`` eviction a counter never goes before the
    tokens it counted."""
    return [
        (
            f"{store.prefix}:issued:{_short(limit.who)}:{now // limit.seconds}",
            limit.most,
            max(2 * limit.seconds, store.ttl + limit.seconds),
            tokens + limit.uncounted,
        )
        for limit in limits
    ]


def _short(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _in_pipeline(
    store: TokenStore, keys: list[str], counters: list[tuple[str, int, int, int]]
) -> int:
    """The script's work for a Cluster, in one pipeline: the tokens are set first and
    deleted when a limit refuses them."""
    pipe = store.client.pipeline(transaction=False)
    for counter, _, life, add in counters:
        pipe.incrby(counter, add)
        pipe.expire(counter, life)  # every time: INCRBY alone could make a key with none
    for key in keys:
        pipe.set(key, 1, ex=store.ttl, nx=True)
    replies = pipe.execute()
    for number, (_, most, _, _) in enumerate(counters, start=1):
        if int(replies[2 * number - 2]) > most:
            store.client.delete(*keys)
            return number
    return 0 if all(replies[2 * len(counters) :]) else -1


class LocalLimits:
    """The same limits counted in this process alone, for the tokens issued while Redis
    is away: at most ``size`` counters, the oldest forgotten first."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, limits: Sequence[IssueLimit], tokens: int) -> None:
        """Count ``tokens`` against each limit, or none when one would pass its most
        (:class:`TooManyIssued`)."""
        now = int(time.time())
        limits = [limit for limit in limits if limit.most > 0]
        keys = [(limit.who, now // limit.seconds) for limit in limits]
        with self._lock:
            for limit, key in zip(limits, keys, strict=True):
                if self._counts.get(key, 0) + tokens + limit.uncounted > limit.most:
                    raise TooManyIssued(limit, retry_after=limit.seconds - now % limit.seconds)
            for limit, key in zip(limits, keys, strict=True):
                self._counts[key] = self._counts.get(key, 0) + tokens + limit.uncounted
                self._counts.move_to_end(key)
            while len(self._counts) > self.size:
                self._counts.popitem(last=False)
