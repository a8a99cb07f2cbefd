"""The API key commands: create a key (optionally expiring), list keys with their last
use, revoke one key or all of a client's.

    flask --app webapp api-keys create acme [--expires-days 90]   # prints the key, once
    flask --app webapp api-keys list [acme]
    flask --app webapp api-keys revoke acme [--key sk_AbCd1234]
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import func, select, update

from ..db import sessions
from ..shop.models import ApiClient, ApiKey
from .keys import PREFIX_LENGTH, create_api_key, hash_key, usable

__all__ = ["api_keys", "init_app"]

api_keys = AppGroup(
    "api-keys",
    help="The JSON API's keys: create one for a client (shown once), list them with "
    "their last use, revoke one or all of a client's.",
)


@api_keys.command("create")
@click.argument("client_name")
@click.option(
    "--expires-days",
    type=int,
    default=None,
    help="Refuse the key this many days from now (default: no expiry).",
)
@with_appcontext
def create_api_key_command(client_name: str, expires_days: int | None) -> None:
    """Create an API key for CLIENT_NAME and print it once."""
    name = client_name.strip()
    if not 1 <= len(name) <= 100 or not name.isprintable():
        raise click.BadParameter("use 1 to 100 printable characters", param_hint="CLIENT_NAME")
    if expires_days is not None and expires_days < 1:
        raise click.BadParameter("give at least 1 day", param_hint="--expires-days")
    expires_in = None if expires_days is None else timedelta(days=expires_days)
    with sessions()() as db:
        key = create_api_key(db, name, expires_in=expires_in)
        db.commit()
    expiry = "" if expires_days is None else f", expires in {expires_days} days"
    click.echo(f"API key for client {name!r}{expiry} (shown once, store it now):")
    click.echo(key)


@api_keys.command("list")
@click.argument("client_name", required=False)
@with_appcontext
def list_api_keys_command(client_name: str | None) -> None:
    """List API keys (of CLIENT_NAME, or of every client) by their first characters,
    with when each was made, expires and was last used (to the minute), and whether
    it is active, expired or revoked. The keys themselves are never shown again."""
    # Active or not by the database's clock, as a request would find it.
    query = (
        select(ApiClient.name, ApiKey, usable().label("active"))
        .join(ApiClient, ApiClient.id == ApiKey.client_id)
        .order_by(ApiClient.name, ApiKey.created_at, ApiKey.id)
    )
    if client_name is not None:
        query = query.where(ApiClient.name == client_name.strip())
    with sessions()() as db:
        rows = db.execute(query).all()
    click.echo(
        f"{'client':<20} {'key':<12} {'created':<20} {'expires':<20} {'last used':<20} state"
    )
    for name, key, active in rows:
        state = "active" if active else "revoked" if key.revoked_at else "expired"
        click.echo(
            f"{name:<20} {key.key_prefix or '(before 0010)':<12} "
            f"{_when(key.created_at):<20} {_when(key.expires_at, 'no expiry'):<20} "
            f"{_when(key.last_used_at, 'never'):<20} {state}"
        )


@api_keys.command("revoke")
@click.argument("client_name")
@click.option(
    "--key",
    "key",
    default=None,
    metavar="PREFIX",
    help="Only this key: its first characters as api-keys list shows them, "
    "or the whole key. Default: every key of the client.",
)
@with_appcontext
def revoke_api_key_command(client_name: str, key: str | None) -> None:
    """Revoke CLIENT_NAME's keys (or one of them): their next request gets 401."""
    name = client_name.strip()
    with sessions()() as db:
        client_id = db.scalar(select(ApiClient.id).where(ApiClient.name == name))
        if client_id is None:
            raise click.ClickException(f"There is no client named {name!r} (api-keys list).")
        which = [ApiKey.client_id == client_id, ApiKey.revoked_at.is_(None)]
        if key is not None:
            key = key.strip()
            which.append(
                ApiKey.key_hash == hash_key(key)
                if len(key) > PREFIX_LENGTH
                else ApiKey.key_prefix == key
            )
        revoked = db.scalars(
            update(ApiKey).where(*which).values(revoked_at=func.now()).returning(ApiKey.id)
        ).all()
        if not revoked:
            db.rollback()
            raise click.ClickException(
                f"Client {name!r} has no active key" + (f" {key!r}." if key else ".")
            )
        if key is not None and len(revoked) > 1:
            db.rollback()
            raise click.ClickException(
                f"{key!r} names {len(revoked)} keys: nothing revoked. Give the whole key."
            )
        db.commit()
    click.echo(
        f"Revoked {len(revoked)} key{'s' if len(revoked) > 1 else ''} of client "
        f"{name!r}: refused from their next request."
    )


def _when(moment: datetime | None, none: str = "") -> str:
    return none if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def init_app(app: Flask) -> None:
    app.cli.add_command(api_keys)
