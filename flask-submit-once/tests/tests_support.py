"""Small helpers the library's tests share (not a conftest: imported by name)."""

from __future__ import annotations

import re
import socket

from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Signup(Base):
    """What a submit creates in these tests: one row per token, its digest UNIQUE, and
    the fingerprint of what was submitted beside it."""
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    token_digest: Mapped[str] = mapped_column(String(43), unique=True)
    fingerprint: Mapped[str | None] = mapped_column(String(43))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hidden(html: str, name: str) -> str:
    """The value of the hidden input called ``name`` in a rendered page."""
    match = re.search(rf'name="{name}"[^>]*value="([^"]*)"', html) or \
        re.search(rf'value="([^"]*)"[^>]*name="{name}"', html)
    assert match, f"no hidden input {name!r} on the page"
    return match.group(1)
