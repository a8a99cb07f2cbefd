"""The ``flask --app webapp`` command line: ``init-db``, the app's commands listed even
when the environment is missing, and the old names of the operators' commands.

    flask --app webapp init-db            migrations; the demo catalogue in development
    flask --app webapp init-db --demo     ... and the demo catalogue (safe to run twice)
    flask --app webapp init-db --no-demo  ... and never the demo catalogue

Production starts with no products of ours: its catalogue is the shop's own, stocked
with the ``products`` commands (webapp/products/cli.py).

Each feature registers its own group (``flask orders``, ``refunds``, ``payments``,
``api-keys``, ``products``, ``mail``; the library's ``submit-once``). The flat names
they had before (``ship-order``, ``approve-refund`` …) are hidden commands that stop
with the new name (:data:`RENAMED`), so an operator's script fails saying what to type.

Without the environment (no SECRET_KEY, DATABASE_URL …) ``flask --app webapp --help``
lists the commands, and each one, run, says what to set instead of a traceback:
see :func:`listing_only`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextvars import ContextVar

import click
from flask import Flask, current_app
from flask.cli import NoAppException, ScriptInfo, with_appcontext
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert as pg_insert

from .db import sessions, upgrade
from .shop.models import Product

__all__ = ["CATALOGUE", "RENAMED", "init_app", "listing_only", "seed"]

#: Settings under which the app is built only to list its commands: nothing connects
#: at build time, and no command runs on them (each is replaced, see listing_only).
_NOWHERE = {
    "APP_ENV": "testing",
    "SECRET_KEY": "listing-only",
    "DATABASE_URL": "postgresql+psycopg://nowhere.invalid/none",
    "REDIS_URL": "redis://nowhere.invalid:6379/0",
}
#: Commands of Flask's own that would use the app itself (serve it, open a shell on it).
_USE_THE_APP = frozenset({"run", "shell"})
_listing: ContextVar[bool] = ContextVar("listing", default=False)

#: The operators' commands by their old flat names, and what they are now.
RENAMED = {
    "find-order": "orders find",
    "ship-order": "orders ship",
    "reconcile-payments": "payments reconcile",
    "create-api-key": "api-keys create",
    "list-api-keys": "api-keys list",
    "revoke-api-key": "api-keys revoke",
    "refund-reviews": "refunds reviews",
    "approve-refund": "refunds approve",
    "reject-refund": "refunds reject",
    "refund-photo": "refunds photo",
    "reconcile-refunds": "refunds reconcile",
    "refund-dead-letters": "refunds dead-letters",
}

#: The demo catalogue (scripts/run, the tests, the benchmark).
CATALOGUE = [
    {
        "sku": "MUG-STONE",
        "name": "Stoneware mug",
        "price_cents": 1800,
        "description": "Hand-glazed, 350 ml, dishwasher safe.",
    },
    {
        "sku": "TEA-SENCHA",
        "name": "Sencha green tea, 100 g",
        "price_cents": 1250,
        "description": "First flush, loose leaf.",
    },
    {
        "sku": "POT-CAST",
        "name": "Cast-iron teapot",
        "price_cents": 6400,
        "description": "0.8 l, enamel lined, with infuser.",
    },
    {
        "sku": "SET-COASTER",
        "name": "Cork coasters, set of 4",
        "price_cents": 900,
        "description": "Natural cork, 10 cm.",
    },
]


def init_app(app: Flask) -> None:
    app.cli.add_command(init_db_command)
    for old, new in RENAMED.items():
        app.cli.add_command(_renamed(old, new))


def _renamed(old: str, new: str) -> click.Command:
    """A hidden command under an old name that runs nothing and names the new one."""

    def refuse(args: tuple[str, ...]) -> None:
        raise click.UsageError(
            f"'flask {old}' is now 'flask {new}' (the commands are grouped by feature: "
            f"'flask --help' lists them)."
        )

    return click.Command(
        old,
        callback=refuse,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
        hidden=True,
    )


def seed(engine: Engine) -> None:
    """Insert the demo catalogue; products that exist are left as they are."""
    with engine.begin() as connection:
        connection.execute(
            pg_insert(Product).on_conflict_do_nothing(index_elements=["sku"]),
            [{**item, "active": True} for item in CATALOGUE],
        )


@click.command("init-db")
@click.option(
    "--demo/--no-demo",
    default=None,
    help="Add the demo catalogue (default: only in development and testing).",
)
@with_appcontext
def init_db_command(demo: bool | None) -> None:
    """Apply the migrations, and add the demo catalogue if asked (safe to run twice)."""
    if demo is None:
        demo = current_app.config["APP_ENV"] != "production"
    engine = sessions().kw["bind"]
    upgrade(engine)
    if demo:
        seed(engine)
        click.echo("Database is at the latest migration; demo catalogue seeded.")
    else:
        click.echo(
            "Database is at the latest migration; no demo catalogue "
            "(init-db --demo adds it). Stock the shop with 'flask --app webapp "
            "products import FILE.csv' or 'products add' ('products --help')."
        )


def listing_only(error: RuntimeError, create_app: Callable[..., Flask]) -> Flask:
    """What ``create_app`` returns when the environment is incomplete (``error`` says
    what to set), and only to the ``flask`` command: an app on settings that point
    nowhere, whose own commands are listed with their help and, run, stop with
    ``error``'s message. ``flask run`` and ``flask shell`` get that message at once.
    Anywhere else (gunicorn, a test) ``error`` is raised as it was."""
    context = click.get_current_context(silent=True)
    if context is None or context.find_object(ScriptInfo) is None or _listing.get():
        raise error
    if context.command.name in _USE_THE_APP:
        raise NoAppException(str(error)) from error
    token = _listing.set(True)
    try:
        app = create_app(_NOWHERE)
    except RuntimeError:
        # the environment has a bad value
        raise NoAppException(str(error)) from error
    finally:
        _listing.reset(token)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise click.ClickException(str(error))

    def stand_in(command: click.Command) -> click.Command:
        # the command objects are shared by every app
        copied = copy.copy(command)
        # its commands refuse, its help still shows
        if isinstance(copied, click.Group):
            copied.commands = {name: stand_in(sub) for name, sub in copied.commands.items()}
        else:
            copied.callback = refuse
        return copied

    for name, command in list(app.cli.commands.items()):
        app.cli.commands[name] = stand_in(command)
    return app
