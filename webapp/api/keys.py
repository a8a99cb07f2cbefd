"""Bearer API keys: one API client may hold several keys; only their hashes are stored.

A key is 256 random bits, so a plain SHA-256 of it cannot be reversed or
guessed: no slow password hash is needed, and lookup is one indexed equality.
Idempotency keys are scoped to the *client*, so every key of one client sees
the same idempotency keys. A key may expire and may be revoked; either way its
next request is refused, since every request looks its key up. The commands
that create, list and revoke keys are in key_commands.py.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from flask import request
from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from ..db import sessions
from ..shop.models import ApiClient, ApiKey

__all__ = [
    "KEY_PREFIX",
    "PREFIX_LENGTH",
    "authenticated_client",
    "create_api_key",
    "hash_key",
    "usable",
]

#: Marks a string as one of our keys (secret scanners and humans recognise it).
KEY_PREFIX = "sk_"
#: How much of a key is stored in clear to name it: "sk_" and 8 characters (48 of
#: its 256 bits), what api-keys list shows and api-keys revoke --key takes.
PREFIX_LENGTH = len(KEY_PREFIX) + 8
#: "Last used" is kept to this precision: a key's row is written at most once per
#: interval, not on every request (a busy key costs one UPDATE a minute).
LAST_USED_EVERY = timedelta(minutes=1)


def hash_key(key: str) -> str:
    """What is stored for ``key``, and what a presented key is looked up by."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(db: Session, client_name: str, *, expires_in: timedelta | None = None) -> str:
    """A new key for ``client_name`` (the client is created if new), refused once
    ``expires_in`` has passed when given; commit is the caller's. The returned key is
    the only copy that will ever exist."""
    db.execute(
        pg_insert(ApiClient)
        .values(name=client_name)
        .on_conflict_do_nothing(index_elements=["name"])
    )
    client_id = db.scalar(select(ApiClient.id).where(ApiClient.name == client_name))
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    db.add(
        ApiKey(
            client_id=client_id,
            key_hash=hash_key(key),
            key_prefix=key[:PREFIX_LENGTH],
            # The database's clock, as for every other check of the expiry.
            expires_at=None if expires_in is None else func.now() + expires_in,
        )
    )
    db.flush()
    return key


def usable() -> ColumnElement[bool]:
    """The keys a request may use now: not revoked, not expired (by the database's clock)."""
    return ApiKey.revoked_at.is_(None) & or_(
        ApiKey.expires_at.is_(None), ApiKey.expires_at > func.now()
    )


def authenticated_client() -> int | None:
    """The id of the client whose bearer key this request carries, or None (no key,
    an unknown one, a revoked or an expired one). Records the key's last use, at
    most once a minute: one indexed SELECT a request, one UPDATE a minute per key."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    stale = or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < func.now() - LAST_USED_EVERY)
    with sessions()() as db:
        # An indexed lookup by hash: the secret itself is never compared, so
        # there is no timing signal about it to leak.
        found = db.execute(
            select(ApiKey.id, ApiKey.client_id, stale.label("stale")).where(
                ApiKey.key_hash == hash_key(key), usable()
            )
        ).first()
        if found is None:
            return None
        if found.stale:
            # The same condition again: of two requests that both saw it stale, one writes.
            db.execute(
                update(ApiKey).where(ApiKey.id == found.id, stale).values(last_used_at=func.now())
            )
            db.commit()
        return found.client_id
