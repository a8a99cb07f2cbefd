"""Single-use tokens kept in Redis: the whole token pattern, framework-free.

It needs only redis-py and the standard library, imports nothing from Flask, and can be
copied into a project on its own. Life of a token::

    create()   SET <prefix>:<digest> 1 EX <ttl> NX     when the form is rendered
    verify()   its MAC, no command                     when the form is submitted, then
    is_live()  EXISTS <prefix>:<digest>                (only before something costly)
    consume()  GETDEL <prefix>:<digest>

A key the *caller* chooses (an ``Idempotency-Key`` header, a webhook event id) is not
issued first; it is claimed::

    claim()    SET <prefix>:<digest> 1 NX EX <ttl>     True for one caller
    release()  DEL <prefix>:<digest>                   give it back (nothing committed)

Every command goes through the redis-py client it is given (``set``, ``getdel``,
``delete``), so the client's pool, retries, Sentinel, credential providers and
instrumentation all apply.

Guarantees:

* A token is 256 bits that cannot be guessed. Given a ``secret``, it is 128 random bits
  (the nonce, from :mod:`secrets`) and a 128-bit MAC of them and of the session and form
  it is issued for (HMAC-SHA256 under the secret): :meth:`TokenStore.verify` tells a token
  this store issued from a made-up one *without Redis*, so that a submit accepted while
  Redis is away still takes only issued tokens. Without a secret it is 256 random bits,
  and only Redis knows whether it was issued.
* Of any number of concurrent or repeated ``consume`` calls for one token, at most one
  returns ``True``: GETDEL reads and deletes in one command, and Redis runs commands one
  at a time (why not GET then DEL, or SET NX: the pattern page).
* A token is bound to the session and the form it was issued for: the Redis key is a
  digest of (form, session, token). Pasted into another session or form it names a key
  that does not exist, so the foreign submit is refused *and the owner's key is left
  alone*.
* With a secret, a token that does not verify is refused before any command: it consumes
  nothing.
* The token itself never reaches Redis or a log line, only its digest.
* Every key has a TTL, so an abandoned form costs nothing after it.

What it cannot guarantee: a Redis failover or a restore can bring back a key that was
consumed. Store :meth:`TokenStore.digest` in a UNIQUE column of the row the submit
creates.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from typing import TYPE_CHECKING, Any, TypeAlias

import redis
from redis.cluster import RedisCluster

__all__ = ["NONCE_BYTES", "TOKEN_BYTES", "RedisClient", "TokenStore", "is_well_formed"]

#: A redis-py client for one server (or a Sentinel-managed master) or a Cluster.
RedisClient: TypeAlias = redis.Redis | RedisCluster

#: 32 bytes = 256 bits of randomness, encoded as 43 URL-safe characters.
TOKEN_BYTES = 32
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
#: Of a token with a MAC: the random nonce's bytes; the MAC is the rest.
NONCE_BYTES = 16
#: What the MAC is over besides the token's own parts: no other MAC under the secret is one.
_MAC_LABEL = b"flask-submit-once form token v1"


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
    :param secret: the key of the MAC each token carries (32 random bytes, or derived
        from the app's secret key), so that :meth:`verify` tells an issued token from a
        made-up one without Redis. None: tokens carry no MAC, as in 0.10.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        ttl: int = 3600,
        prefix: str = "so",
        secret: bytes | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be a positive number of seconds")
        if secret is not None and len(secret) < 16:
            raise ValueError("secret must be at least 16 bytes")
        self.client, self.ttl, self.prefix = client, ttl, prefix
        self.secret = secret

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

    def new_token(self, *, session_id: str, form: str) -> str:
        """A token for one rendering of ``form`` in ``session_id``, not yet in Redis (what
        :meth:`create` stores; for a caller that stores many at once): 43 URL-safe
        characters, with a MAC of ``session_id`` and ``form`` when the store has a
        secret."""
        if self.secret is None:
            return secrets.token_urlsafe(TOKEN_BYTES)
        nonce = secrets.token_bytes(NONCE_BYTES)
        return _encode(nonce + self._mac(nonce, session_id=session_id, form=form))

    def verify(self, token: str, *, session_id: str, form: str) -> bool:
        """Whether ``token`` is one this store's secret made for ``session_id`` and
        ``form``, sending no command: a made-up token, or one made for another session,
        form or secret, is ``False``. Not whether it is still live (:meth:`consume`
        says). Without a secret, any well-formed token may be."""
        if not is_well_formed(token):
            return False
        if self.secret is None:
            return True
        raw = base64.urlsafe_b64decode(token + "=")
        if _encode(raw) != token:
            # 43 characters hold 2 bits more than 32 bytes: one spelling per token, so
            # that a token's digest is the only one it has.
            return False
        nonce, mac = raw[:NONCE_BYTES], raw[NONCE_BYTES:]
        return hmac.compare_digest(mac, self._mac(nonce, session_id=session_id, form=form))

    def _mac(self, nonce: bytes, *, session_id: str, form: str) -> bytes:
        assert self.secret is not None
        # Each part with its length: no two (form, session) pairs give the same material.
        parts = (_MAC_LABEL, form.encode(), session_id.encode(), nonce)
        material = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
        return hmac.new(self.secret, material, hashlib.sha256).digest()[: TOKEN_BYTES - NONCE_BYTES]

    def create(self, *, session_id: str, form: str) -> str:
        """A new token for one rendering of ``form`` in ``session_id``: one
        ``SET key 1 EX ttl NX``. Every rendering gets its own token, so open tabs never
        invalidate one another; NX only guards against a collision."""
        token = self.new_token(session_id=session_id, form=form)
        digest = self.digest(token, session_id=session_id, form=form)
        if not self.client.set(self.key(digest), 1, ex=self.ttl, nx=True):
            raise RuntimeError("token collision: the random source is broken")
        return token

    def consume(self, token: str, *, session_id: str, form: str) -> bool:
        """Use ``token`` up: ``True`` for exactly one caller, ever (one ``GETDEL``).
        ``False``: already consumed, expired, never issued, or another session's or
        form's; what the first submit left behind tells which. A token that does not
        :meth:`verify` is ``False`` with no command sent (with a secret)."""
        if self.secret is not None and not self.verify(token, session_id=session_id, form=form):
            return False
        return self.consume_digest(self.digest(token, session_id=session_id, form=form))

    def is_live(self, token: str, *, session_id: str, form: str) -> bool:
        """Whether ``token`` is still live: issued, not yet consumed, not expired (one
        ``EXISTS``; a token that does not :meth:`verify` is ``False`` with no command
        sent). Ask it before something costly that is worth doing only for a submit that
        can still take effect (a card checked at a provider). A hint, not a claim: only
        :meth:`consume` decides, and a live token may be consumed by another request
        the next moment."""
        if self.secret is not None and not self.verify(token, session_id=session_id, form=form):
            return False
        return self.holds(self.digest(token, session_id=session_id, form=form))

    def holds(self, digest: str) -> bool:
        """Whether Redis holds the key of ``digest`` (one ``EXISTS``): for an issued
        token, that it is still live; for a claimed key, that it is claimed."""
        return bool(self.client.exists(self.key(digest)))

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


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
