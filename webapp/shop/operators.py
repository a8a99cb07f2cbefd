"""Who ran an operator command, and the JSON line that says what they did.

Every command that changes the shop (``orders ship``, ``products …``,
``refunds approve``, ``refunds reject``, ``refunds dead-letters --requeue``) takes
``--by NAME``; without it the operator is ``SUDO_USER`` (the person behind ``sudo
flask …``), else the login user. The name is stored in the row the action changes
(``orders.shipped_by``, ``products.changed_by``, ``refund_requests.reviewed_by`` and
``requeued_by``) and in the action's log line (logger ``webapp.shop.operators``)::

    {"logger": "webapp.shop.operators", "message": "orders ship by alice",
     "action": "orders ship", "operator": "alice", "order_number": "KX7P2M9QRT", …}

It says who, not that they may: whoever can run ``flask`` with the shop's environment
holds its database password, and could write any name. It is for the team's own record.
"""

from __future__ import annotations

import getpass
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .models import OPERATOR_MAX
from .order_rules import has_control_chars

__all__ = ["by_option", "operator_from_environment", "record"]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def operator_from_environment() -> str:
    """``SUDO_USER``, else the login user (``getpass.getuser``), else the uid."""
    try:
        login: str | None = getpass.getuser()
    # no LOGNAME/USER and no passwd entry (a bare container)
    except (OSError, KeyError):
        login = None
    for name in (os.environ.get("SUDO_USER"), login):
        if name and name.strip() and not has_control_chars(name):
            return name.strip()[:OPERATOR_MAX]
    return f"uid {os.getuid()}"


def _operator(_context: click.Context, _param: click.Parameter, value: str | None) -> str:
    if value is None:
        return operator_from_environment()
    name = value.strip()
    if not 1 <= len(name) <= OPERATOR_MAX or has_control_chars(name):
        raise click.BadParameter(f"use 1 to {OPERATOR_MAX} printable characters")
    return name


def by_option(command: F) -> F:
    """``--by NAME``: who runs the command (default: SUDO_USER, else the login user)."""
    return click.option(
        "--by",
        "by",
        metavar="NAME",
        callback=_operator,
        help="Who you are, for the record (default: $SUDO_USER, else your login name).",
    )(command)


def record(action: str, by: str, **fields: object) -> None:
    """Log that ``by`` did ``action``, with ``fields`` (never a private key or a secret)."""
    log.info("%s by %s", action, by, extra={"action": action, "operator": by, **fields})
