"""Single-use tokens kept in Redis: the whole token pattern, framework-free.

It needs only redis-py and the standard library, imports nothing from Flask, and can be
copied into a project on its own. Life of a token::

    create()   SET <prefix>:<digest> 1 EX <ttl> NX     when the form is rendered
    consume()  GETDEL <prefix>:<digest>                when the form is submitted

A key the *caller* chooses (an ``Idempotency-Key`` header, a webhook event id) is not
issued first; it is claimed::

    claim()    SET <prefix>:<digest> 1 NX EX <ttl>     True for one caller
    release()  DEL <prefix>:<digest>                   give it back (nothing committed)

Every command goes through the redis-py client it is given (``set``, ``getdel``,
``delete``), so the client's pool, retries, Sentinel, credential providers and
instrumentation all apply.

Guarantees:

* A token is 256 random bits from :mod:`secrets`; it cannot be guessed.
* Of any number of concurrent or repeated ``consume`` calls for one token, at most one
  returns ``True``: GETDEL reads and deletes in one command, and Redis runs commands one
  at a time (why not GET then DEL, or SET NX: the pattern page).
* A token is bound to the session and the form it was issued for: the Redis key is a
  digest of (form, session, token). Pasted into another session or form it names a key
  that does not exist, so the foreign submit is refused *and the owner's key is left
  alone*.
* The token itself never reaches Redis or a log line, only its digest.
* Every key has a TTL, so an abandoned form costs nothing after it.

What it cannot guarantee: a Redis failover or a restore can bring back a key that was
consumed. Store :meth:`TokenStore.digest` in a UNIQUE column of the row the submit
creates.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import TYPE_CHECKING, Any, TypeAlias

import redis
from redis.cluster import RedisCluster

__all__ = ["TOKEN_BYTES", "RedisClient", "TokenStore", "is_well_formed"]

#: A redis-py client for one server (or a Sentinel-managed master) or a Cluster.
RedisClient: TypeAlias = redis.Redis | RedisCluster

#: 32 bytes = 256 bits of randomness, encoded as 43 URL-safe characters.
TOKEN_BYTES = 32
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")


def is_well_formed(token: object) -> bool:
    """Whether ``token`` has the exact shape :meth:`TokenStore.create` makes; check it
    before touching Redis (a malformed value is a client error, not an expired form)."""
    return isinstance(token, str) and _TOKEN_SHAPE.fullmatch(token) is not None


class TokenStore:
    """Create and consume single-use tokens in one Redis database.

    :param client: a redis-py client (``Redis`` or ``RedisCluster``); every command
        touches one key, so any Cluster slot layout works.
    :param ttl: seconds a rendered form stays submittable.
    :param prefix: namespace for the keys, so they can share a database.
    """

    def __init__(self, client: RedisClient, *, ttl: int = 3600, prefix: str = "so") -> None:
        if ttl <= 0:
            raise ValueError("ttl must be a positive number of seconds")
        self.client, self.ttl, self.prefix = client, ttl, prefix

    @staticmethod
    def digest(token: str, *, session_id: str, form: str) -> str:
        """A 43-character digest of the token and what it is bound to: the Redis key
        (after the prefix), the value of the UNIQUE column, and the only form of the
        token that may appear in a log."""
        material = "\x00".join((form, session_id, token)).encode()
        return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:43]

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == "issue":
                raise AttributeError("TokenStore.issue was renamed create in Flask-Submit-Once 1.0")
            raise AttributeError(f"'TokenStore' object has no attribute {name!r}")

    def key(self, digest: str) -> str:
        """The Redis key of a token's ``digest``."""
        return f"{self.prefix}:{digest}"

    def create(self, *, session_id: str, form: str) -> str:
        """A new token for one rendering of ``form`` in ``session_id``: one
        ``SET key 1 EX ttl NX``. Every rendering gets its own token, so open tabs never
        invalidate one another; NX only guards against a 256-bit collision."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        digest = self.digest(token, session_id=session_id, form=form)
        if not self.client.set(self.key(digest), 1, ex=self.ttl, nx=True):
            raise RuntimeError("token collision: the random source is broken")
        return token

    def consume(self, token: str, *, session_id: str, form: str) -> bool:
        """Use ``token`` up: ``True`` for exactly one caller, ever (one ``GETDEL``).
        ``False``: already consumed, expired, never issued, or another session's or
        form's; what the first submit left behind tells which."""
        return self.consume_digest(self.digest(token, session_id=session_id, form=form))

    def consume_digest(self, digest: str) -> bool:
        """:meth:`consume` for a caller that holds the token's :meth:`digest` already."""
        return self.client.getdel(self.key(digest)) is not None

    def claim(self, digest: str, *, ttl: int | None = None) -> bool:
        """Claim the key ``digest`` names: ``True`` for exactly one caller until its TTL
        ends (``ttl``, default the store's) or :meth:`release`. One ``SET NX EX``: the
        check and the claim are one command. Also what restores a consumed token after
        an unconfirmed COMMIT, so that resubmitting it settles what happened."""
        return bool(self.client.set(self.key(digest), 1, ex=ttl or self.ttl, nx=True))

    def release(self, digest: str) -> None:
        """Give a claimed key back (one ``DEL``): a request that failed on our side
        must not pin a caller's key."""
        self.client.delete(self.key(digest))
