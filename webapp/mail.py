"""Mail the shop sends (an order's confirmation link), through one of two backends.

``MAIL_BACKEND`` chooses:

* ``outbox`` (development and testing): nothing leaves the machine; each mail is kept in
  a Redis list (the newest :data:`OUTBOX_SIZE`), which the tests read with
  :func:`outbox` and the operator with ``flask --app webapp mail outbox``.
* ``smtp`` (production): :mod:`smtplib` to ``MAIL_SMTP_URL``, from ``MAIL_FROM``.
  ``smtps://user:password@host:465`` is TLS from the start; ``smtp://...:587`` must
  offer STARTTLS, which is required unless the host is this machine (a local relay).

Production never uses the outbox (its mails would reach nobody): with ``MAIL_SMTP_URL``
and ``MAIL_FROM`` it sends by SMTP; with one of them, or with ``MAIL_BACKEND=outbox``, it
refuses to start; with neither, mail is off, said at start, and the pages that would
send a link say to write to the shop instead (:func:`enabled`).

A mail's body may hold a secret (a single-use link): no log line carries a body or a
full address, only the subject and :func:`masked` address.
"""

from __future__ import annotations

import json
import logging
import smtplib
import ssl
from dataclasses import asdict, dataclass
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlsplit

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from .extensions import submit_once

__all__ = [
    "OUTBOX_KEY",
    "Mail",
    "check_settings",
    "enabled",
    "init_app",
    "masked",
    "outbox",
    "send",
]

log = logging.getLogger(__name__)

#: The development outbox: a Redis list, newest first, kept a week after its last mail
#: (every key of the shop's expires).
OUTBOX_KEY = "shop:mail:outbox"
OUTBOX_SIZE = 100
OUTBOX_SECONDS = 7 * 24 * 3600
BACKENDS = ("outbox", "smtp", "off")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SMTP_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Mail:
    """One plain-text mail."""

    to: str
    subject: str
    body: str


def check_settings(config: dict[str, Any]) -> None:
    """Pick the backend for the environment and refuse an incomplete one (from
    :func:`webapp.config.finish`): RuntimeError saying what to set."""
    env = config["APP_ENV"]
    url, sender = config.get("MAIL_SMTP_URL"), config.get("MAIL_FROM")
    backend = config.get("MAIL_BACKEND") or (
        "smtp" if url or sender or env == "production" else "outbox"
    )
    if backend not in BACKENDS:
        raise RuntimeError(f"MAIL_BACKEND={backend!r} is not one of {', '.join(BACKENDS)}.")
    if backend == "outbox" and env == "production":
        raise RuntimeError(
            "MAIL_BACKEND=outbox keeps mail in Redis, where no customer reads it: in "
            "production set MAIL_SMTP_URL (e.g. smtps://user:password@smtp.example:465) "
            "and MAIL_FROM (e.g. Fernleaf <orders@fernleaf.example>)."
        )
    if not config.get("MAIL_BACKEND") and env == "production" and not url and not sender:
        # Neither set: mail is off, as /metrics is without METRICS_TOKEN.
        backend = "off"
    if backend == "smtp":
        for name, example in (
            ("MAIL_SMTP_URL", "smtps://user:password@smtp.example:465"),
            ("MAIL_FROM", "Fernleaf <orders@fernleaf.example>"),
        ):
            if not config.get(name):
                raise RuntimeError(
                    f"{name} is not set: mail is sent by SMTP, which needs it (e.g. "
                    f"{name}={example}). Unset both MAIL_SMTP_URL and MAIL_FROM to turn "
                    "mail off."
                )
        scheme = urlsplit(str(url)).scheme
        if scheme not in ("smtp", "smtps") or not urlsplit(str(url)).hostname:
            raise RuntimeError(
                "MAIL_SMTP_URL must be smtps://user:password@host:465 (TLS) or "
                "smtp://user:password@host:587 (STARTTLS)."
            )
    config["MAIL_BACKEND"] = backend


def init_app(app: Flask) -> None:
    app.cli.add_command(mail_command)
    if app.config["MAIL_BACKEND"] == "off":
        log.warning(
            "mail is off: MAIL_SMTP_URL and MAIL_FROM are unset in production, so no "
            "order confirmation link can be sent"
        )


def enabled() -> bool:
    """Whether this app sends mail at all."""
    return bool(current_app.config["MAIL_BACKEND"] != "off")


def send(mail: Mail) -> None:
    """Send ``mail`` through the app's backend (nothing when mail is off). Raises the
    backend's error (:class:`smtplib.SMTPException`, :class:`OSError`, a Redis error)."""
    backend = current_app.config["MAIL_BACKEND"]
    if backend == "outbox":
        redis = submit_once.redis
        pipe = redis.pipeline(transaction=False)
        pipe.lpush(OUTBOX_KEY, json.dumps(asdict(mail)))
        pipe.ltrim(OUTBOX_KEY, 0, OUTBOX_SIZE - 1)
        pipe.expire(OUTBOX_KEY, OUTBOX_SECONDS)
        pipe.execute()
    elif backend == "smtp":
        _send_smtp(mail)
    else:
        return
    log.info("mail %r sent to %s (%s)", mail.subject, masked(mail.to), backend)


def _send_smtp(mail: Mail) -> None:
    url = urlsplit(current_app.config["MAIL_SMTP_URL"])
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = (
        current_app.config["MAIL_FROM"],
        mail.to,
        mail.subject,
    )
    message.set_content(mail.body)
    host = url.hostname or ""
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if url.scheme == "smtps":
        smtp = smtplib.SMTP_SSL(
            host, url.port or 465, timeout=SMTP_TIMEOUT_SECONDS, context=context
        )
    else:
        smtp = smtplib.SMTP(host, url.port or 587, timeout=SMTP_TIMEOUT_SECONDS)
    with smtp:
        if url.scheme == "smtp":
            smtp.ehlo()
            if smtp.has_extn("starttls"):
                smtp.starttls(context=context)
                smtp.ehlo()
            elif host not in LOCAL_HOSTS:
                # The password and the link would cross the network in the clear.
                raise smtplib.SMTPNotSupportedError(f"{host} does not offer STARTTLS")
        if url.username:
            smtp.login(unquote(url.username), unquote(url.password or ""))
        smtp.send_message(message)


def outbox() -> list[Mail]:
    """The development outbox, newest first."""
    return [Mail(**json.loads(raw)) for raw in submit_once.redis.lrange(OUTBOX_KEY, 0, -1)]


def masked(address: str) -> str:
    """An address as a page or a log line may show it: ``a•••@e•••.com``."""
    local, _, domain = address.rpartition("@")
    name, dot, tld = domain.rpartition(".")
    if not local or not name:
        return "•••"
    return f"{local[0]}•••@{name[0]}•••{dot}{tld}"


@click.group("mail", cls=AppGroup)
def mail_command() -> None:
    """The mail the shop sent (development outbox)."""


@mail_command.command("outbox")
def outbox_command() -> None:
    """Print the development outbox, newest first."""
    if current_app.config["MAIL_BACKEND"] != "outbox":
        raise click.ClickException(
            f"MAIL_BACKEND is {current_app.config['MAIL_BACKEND']}: there is no outbox."
        )
    mails = outbox()
    if not mails:
        click.echo("The outbox is empty.")
    for mail in mails:
        click.echo(f"To: {mail.to}\nSubject: {mail.subject}\n\n{mail.body}\n{'-' * 60}")
