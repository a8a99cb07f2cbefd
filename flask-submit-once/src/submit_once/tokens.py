"""Single-use form tokens kept in Redis.

This module is the whole token pattern; copy it into your project. It needs
only redis-py and the standard library, and imports nothing from Flask.

Life of a token::

    issue()    SET <prefix>:<digest> 1 EX <ttl> NX     when the form is rendered
    consume()  GETDEL <prefix>:<digest>                when the form is submitted
               (consume_digest() when the digest is at hand)

Issuing can be bounded: per session, per client address, per anything
(``issue(..., limits=[IssueLimit("client:" + address, 40, 60)])``). Each limit is a
counter per window, and the counters and the SET are one command, one round trip
as before (a Cluster, where the keys live on different nodes, sends them as one
pipeline instead)::

    EVALSHA <issue script> <prefix>:<digest> <prefix>:issued:<who digest>:<window> ...
        GET each counter; one over its limit: stop, nothing written
        INCR each counter (EXPIRE it with its first count)
        SET <prefix>:<digest> 1 EX <ttl> NX

A page with several forms gets all their tokens in that one command
(``issue_many``).

A count kept in a cookie is the client's to drop; these are kept in Redis, and
the client's address is counted as well as its session, so a flood of form views
without cookies cannot fill Redis either.

A key the *caller* chooses (an ``Idempotency-Key`` header, a webhook event id)
is not issued first; it is claimed::

    claim()    SET <prefix>:<digest> <value> NX EX <ttl>   True for one caller
    release()  DEL <prefix>:<digest>                       give it back (failure)

Every command goes through the redis-py client it is given (``set``, ``getdel``,
``delete``, a script registered with ``register_script``, a pipeline on a Cluster), so
its pool, retries, Sentinel, credential providers and instrumentation all apply.

Guarantees:

* A token is 256 random bits from :mod:`secrets`; it cannot be guessed.
* Of any number of concurrent or repeated ``consume`` calls for one token, at
  most one returns ``True``. GETDEL reads and deletes in a single command, and
  Redis runs commands one at a time, so no two callers can both see the key
  (why not GET then DEL, or SET NX: :doc:`/pattern`).
* A token is bound to the session and the form it was issued for: the Redis
  key is a digest of (form, session, token). Pasted into another session or
  another form it names a key that does not exist, so the foreign submit is
  refused *and the owner's key is left alone*: a stranger cannot burn it.
* The token itself never reaches Redis or a log line, only its digest.
* Every key has a TTL, so an abandoned form costs nothing after it.

What it cannot guarantee: a Redis failover or a restore can bring back a key that
was consumed. Store :meth:`TokenStore.digest` in a UNIQUE column of the row the
submit creates (why: :doc:`/pattern`).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import redis
from redis.cluster import RedisCluster

__all__ = ["TOKEN_BYTES", "IssueLimit", "RedisClient", "TokenStore", "TooManyIssued",
           "is_well_formed"]

#: A redis-py client for one server (or a Sentinel-managed master) or a Cluster.
RedisClient: TypeAlias = redis.Redis | RedisCluster

#: Bounded waits for every client the package makes (here and in redis_urls.py): a
#: dead Redis costs a request two seconds, never a hung worker.
_TIMEOUTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


def _client_for(url: str) -> redis.Redis:
    """The package's one way to make a client for a one-server URL (``redis://``,
    ``rediss://``, ``unix://``): one pool shared by threads, replies as ``str``."""
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30,
                                **_TIMEOUTS)

#: 32 bytes = 256 bits of randomness, encoded as 43 URL-safe characters.
TOKEN_BYTES = 32
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")


def _short_digest(value: str) -> str:
    """16 hex characters naming ``value`` in a key: bounded, and no address kept in Redis."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def is_well_formed(token: object) -> bool:
    """Whether ``token`` has the exact shape :meth:`TokenStore.issue` produces.

    Check this before touching Redis: a malformed value is a client error, not
    a token that expired.
    """
    return isinstance(token, str) and _TOKEN_SHAPE.fullmatch(token) is not None


@dataclass(frozen=True)
class IssueLimit:
    """At most ``most`` tokens per ``seconds`` for whoever ``who`` names (say
    ``"client:" + address`` or ``"session:" + session_id``; only its digest reaches
    Redis). Windows are aligned to multiples of ``seconds``, so any ``seconds`` span
    holds at most twice ``most``."""
    who: str
    most: int
    seconds: int = 60
    #: Tokens issued under this limit before its counter could be kept (a session's
    #: first form, issued before the session had an id): added with this issue.
    uncounted: int = 0


class TooManyIssued(Exception):
    """``limit`` was reached; no token was left behind."""

    def __init__(self, limit: IssueLimit, retry_after: int) -> None:
        super().__init__(f"too many tokens issued; retry after {retry_after} s")
        self.limit = limit
        self.retry_after = retry_after


#: KEYS: the n tokens, then one counter per limit. ARGV[1] n, ARGV[2] the tokens' TTL,
#: then per limit its most, its counter's TTL and how much to add (n and its uncounted).
#: Returns 0 when the tokens are set, the refusing limit's 1-based number, or -1 on the
#: impossible collision. Every limit is
#: checked before anything is written, so a refused rendering leaves no key behind; a
#: script runs whole, so a counter never lives without its TTL.
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


class TokenStore:
    """Issue and consume single-use tokens in one Redis database.

    :param client: a redis-py client (``Redis`` or ``RedisCluster``). On a
        Cluster every command touches one key (``issue`` with limits sends a
        pipeline there, not its script), so any slot layout works.
    :param ttl: seconds a rendered form stays submittable.
    :param prefix: namespace for the keys, so they can share a database.
    """

    def __init__(self, client: RedisClient, *, ttl: int = 3600, prefix: str = "ft") -> None:
        if ttl <= 0:
            raise ValueError("ttl must be a positive number of seconds")
        self.client = client
        self.ttl = ttl
        self.prefix = prefix

    @property
    def client(self) -> RedisClient:
        """The redis-py client every command goes through (assignable)."""
        return self._client

    @client.setter
    def client(self, client: RedisClient) -> None:
        self._client = client
        # EVALSHA, and SCRIPT LOAD once when Redis forgot the script (a restart, a flush).
        self._issue_script = client.register_script(_ISSUE)

    @staticmethod
    def digest(token: str, *, session_id: str, form: str) -> str:
        """A 43-character digest of the token and what it is bound to.

        This is the Redis key (after the prefix), the value to keep in the
        UNIQUE column of the row the submit creates, and the only form of the
        token that should ever appear in a log.
        """
        material = "\x00".join((form, session_id, token)).encode()
        return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:43]

    def key(self, token: str, *, session_id: str, form: str) -> str:
        """The Redis key for ``token`` as bound to this session and form."""
        return f"{self.prefix}:{self.digest(token, session_id=session_id, form=form)}"

    def issue(self, *, session_id: str, form: str,
              limits: Sequence[IssueLimit] = ()) -> str:
        """Create a token for one rendering of ``form`` in ``session_id``.

        One ``SET key 1 EX ttl NX``. Every rendering gets its own token, so
        many open tabs never invalidate one another. NX only guards against
        the impossible (a 256-bit collision): it never overwrites a live key.

        With ``limits``, their counters are checked and taken in the same command
        (one round trip); over one, nothing is written and :class:`TooManyIssued`
        says which limit and when to come back.
        """
        return self.issue_many(session_id=session_id, forms=(form,), limits=limits)[0]

    def issue_many(self, *, session_id: str, forms: Sequence[str],
                   limits: Sequence[IssueLimit] = ()) -> list[str]:
        """:meth:`issue` for every form of one page, in one round trip: a token for
        each of ``forms``, in order. Each counts against ``limits``; refused or
        unreachable, the page gets none of them."""
        tokens = [secrets.token_urlsafe(TOKEN_BYTES) for _ in forms]
        keys = [self.key(token, session_id=session_id, form=form)
                for token, form in zip(tokens, forms, strict=True)]
        limits = [limit for limit in limits if limit.most > 0]
        if not keys:
            return tokens
        now = int(time.time())
        counters = self._counters(limits, now, len(keys))
        if len(keys) == 1 and not counters:
            refused = 0 if self.client.set(keys[0], 1, ex=self.ttl, nx=True) else -1
        elif isinstance(self.client, RedisCluster):
            refused = self._issue_in_pipeline(keys, counters)
        else:
            refused = int(self._issue_script(
                keys=[*keys, *(counter for counter, *_ in counters)],
                args=[len(keys), self.ttl,
                      *(n for _, most, life, add in counters for n in (most, life, add))]))
        if refused < 0:
            raise RuntimeError("token collision: the random source is broken")
        if refused:
            limit = limits[refused - 1]
            raise TooManyIssued(limit, retry_after=limit.seconds - now % limit.seconds)
        return tokens

    def _counters(self, limits: Sequence[IssueLimit], now: int,
                  tokens: int) -> list[tuple[str, int, int, int]]:
        """(key, most, TTL, what to add) of each limit's counter for the window ``now``
        falls in, for ``tokens`` new tokens. A
        counter lives at least two windows, so it never ends inside its own, and longer
        than any token issued in its window: under ``volatile-ttl`` eviction (the nearest
        expiry goes first) a counter is never evicted before the tokens it counted."""
        return [(f"{self.prefix}:issued:{_short_digest(limit.who)}:{now // limit.seconds}",
                 limit.most, max(2 * limit.seconds, self.ttl + limit.seconds),
                 tokens + limit.uncounted)
                for limit in limits]

    def _issue_in_pipeline(self, keys: list[str],
                           counters: list[tuple[str, int, int, int]]) -> int:
        """The script's work for a Cluster, whose keys sit on different nodes, in one
        pipeline: the tokens are set first and deleted if a limit refuses them."""
        pipe = self.client.pipeline(transaction=False)
        for counter, _, life, add in counters:
            pipe.incrby(counter, add)
            pipe.expire(counter, life)  # every time: INCRBY alone could make a key with none
        for key in keys:
            pipe.set(key, 1, ex=self.ttl, nx=True)
        replies = pipe.execute()
        stored = replies[2 * len(counters):]
        for number, (_, most, _, _) in enumerate(counters, start=1):
            if int(replies[2 * number - 2]) > most:
                self.client.delete(*keys)
                return number
        return 0 if all(stored) else -1

    def consume(self, token: str, *, session_id: str, form: str) -> bool:
        """Use ``token`` up; ``True`` for exactly one caller, ever.

        One ``GETDEL``. ``False`` means the token was already consumed, has
        expired, was never issued, or belongs to another session or form; the
        caller decides which by looking at what the first submit left behind.
        """
        return self.consume_digest(self.digest(token, session_id=session_id, form=form))

    def consume_digest(self, digest: str) -> bool:
        """:meth:`consume` for a caller that already holds the token's :meth:`digest`
        (a submit needs it for the lock and the UNIQUE column too: computed once)."""
        return self.client.getdel(f"{self.prefix}:{digest}") is not None

    def claim(self, name: str, *, session_id: str, form: str, value: str = "1") -> bool:
        """Take a caller-chosen ``name`` (an idempotency key, an event id); ``True``
        for exactly one caller until the TTL ends or :meth:`release` is called.

        One ``SET key value NX EX ttl``: the check and the mark are one command,
        so two concurrent claims cannot both win. ``session_id`` scopes the name
        (one API client's key means nothing to another's).
        """
        key = self.key(name, session_id=session_id, form=form)
        return bool(self.client.set(key, value, ex=self.ttl, nx=True))

    def release(self, name: str, *, session_id: str, form: str) -> None:
        """Give a claimed ``name`` back (one ``DEL``), so a request that failed on
        our side does not pin it: the caller may retry with the same name."""
        self.client.delete(self.key(name, session_id=session_id, form=form))
