"""Who listens on a TCP port of this machine (Linux /proc; elsewhere: nobody known)."""

from __future__ import annotations

import socket
from contextlib import suppress
from pathlib import Path

__all__ = ["holder", "in_use"]

_LISTEN = "0A"


def in_use(host: str, port: int) -> bool:
    """Whether something accepts connections on ``host:port`` (any address: loopback)."""
    target = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        return False


def holder(port: int) -> str:
    """``process 1234 (redis-server)`` listening on ``port``, or ``another program``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()
                if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        with suppress(OSError):
            for fd in (process / "fd").iterdir():
                if inodes and str(fd.readlink()) in inodes:
                    name = (process / "comm").read_text().strip()
                    return f"process {process.name} ({name})"
    return "another program"
