"""PostgreSQL round trips counted on the wire, whatever the driver does.

A relay on 127.0.0.1 between a client and the server counts the server's
ReadyForQuery messages: one at the end of every round trip (a simple query, an
extended-protocol Sync, the end of the start-up). It runs in a process of its
own, so its work never shows in the caller's CPU time::

    with Relay(postgres.port, postgres.password) as relay:
        engine = make_engine(relay.url("bench"))
        with relay.count() as trips:
            ...
        trips[0]   # round trips made inside the block
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
from collections.abc import Iterator


def _forward(source: socket.socket, target: socket.socket, count=None) -> None:
    """Copy ``source`` to ``target``; with ``count``, count the ReadyForQuery ('Z')
    messages on the way (type byte, 4-byte length including itself, body)."""
    # skip: bytes of the current message still to pass
    pending, skip = bytearray(), 0
    try:
        while data := source.recv(65536):
            if count is not None:
                pending += data
                while True:
                    taken = min(skip, len(pending))
                    del pending[:taken]
                    skip -= taken
                    if skip or len(pending) < 5:
                        break
                    if pending[0] == ord("Z"):
                        with count.get_lock():
                            count.value += 1
                    skip = 1 + int.from_bytes(pending[1:5], "big")
            # after counting: the client sees it counted
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve(server_port: int, count, port, ready) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port.value = listener.getsockname()[1]
    ready.set()
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", server_port))
        threading.Thread(target=_forward, args=(client, server), daemon=True).start()
        threading.Thread(target=_forward, args=(server, client, count), daemon=True).start()


class Relay:
    """The counting relay to the PostgreSQL server on ``server_port``, whose superuser
    has ``password``."""

    def __init__(self, server_port: int, password: str | None) -> None:
        self.password = password
        context = multiprocessing.get_context("spawn")
        self._count = context.Value("q", 0)
        port, ready = context.Value("i", 0), context.Event()
        self._process = context.Process(
            target=_serve, daemon=True, args=(server_port, self._count, port, ready)
        )
        self._process.start()
        if not ready.wait(30):
            raise RuntimeError("the round-trip relay did not start")
        self.port = port.value

    def url(self, database: str) -> str:
        """A SQLAlchemy URL through the relay. No SSL or GSS negotiation: the relay
        reads the plain protocol from the first byte."""
        return (
            f"postgresql+psycopg://postgres:{self.password}@127.0.0.1:{self.port}/{database}"
            "?sslmode=disable&gssencmode=disable"
        )

    @contextlib.contextmanager
    def count(self) -> Iterator[list[int]]:
        """Yields a list that holds, after the block, the round trips made in it."""
        into: list[int] = []
        before = self._count.value
        yield into
        into.append(self._count.value - before)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(10)
