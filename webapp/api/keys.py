"""Bearer API keys: one API client may hold several keys; only their hashes are stored.

    flask --app webapp create-api-key acme     # prints a new key for client "acme", once

A key is 256 random bits, so a plain SHA-256 of it cannot be reversed or
guessed: no slow password hash is needed, and lookup is one indexed equality.
Idempotency keys are scoped to the *client*, so every key of one client sees
the same idempotency keys.
"""

from __future__ import annotations

import hashlib
import secrets

import click
from flask import Flask, request
from flask.cli import with_appcontext
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from ..db import sessions
from ..models import ApiClient, ApiKey

__all__ = ["KEY_PREFIX", "authenticated_client", "create_api_key", "hash_key", "init_app"]

#: Marks a string as one of our keys (secret scanners and humans recognise it).
KEY_PREFIX = "sk_"


def hash_key(key: str) -> str:
    """What is stored for ``key``, and what a presented key is looked up by."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(db: Session, client_name: str) -> str:
    """A new key for ``client_name`` (the client is created if new); commit is
    the caller's. The returned key is the only copy that will ever exist."""
    db.execute(pg_insert(ApiClient).values(name=client_name)
               .on_conflict_do_nothing(index_elements=["name"]))
    client_id = db.scalar(select(ApiClient.id).where(ApiClient.name == client_name))
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    db.add(ApiKey(client_id=client_id, key_hash=hash_key(key)))
    db.flush()
    return key


def authenticated_client() -> int | None:
    """The id of the client whose bearer key this request carries, or None."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    with sessions()() as db:
        # An indexed lookup by hash: the secret itself is never compared, so
        # there is no timing signal about it to leak.
        return db.scalar(select(ApiKey.client_id).where(ApiKey.key_hash == hash_key(key)))


@click.command("create-api-key")
@click.argument("client_name")
@with_appcontext
def create_api_key_command(client_name: str) -> None:
    """Create an API key for CLIENT_NAME and print it once."""
    name = client_name.strip()
    if not 1 <= len(name) <= 100 or not name.isprintable():
        raise click.BadParameter("use 1 to 100 printable characters", param_hint="CLIENT_NAME")
    with sessions()() as db:
        key = create_api_key(db, name)
        db.commit()
    click.echo(f"API key for client {name!r} (shown once, store it now):")
    click.echo(key)


def init_app(app: Flask) -> None:
    app.cli.add_command(create_api_key_command)
