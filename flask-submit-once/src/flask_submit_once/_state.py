"""One app's settings and stores, kept in ``app.extensions["submit_once"]``, and the
settled-submits memory (a process's fast path for repeats)."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

from flask import Flask, current_app

from ._limits import Issuer, LocalLimits
from ._sessions import Sessions
from ._signed import SignedTokens
from ._tokens import TokenStore

__all__ = ["EXTENSION", "Settled", "State", "state"]

EXTENSION = "submit_once"
#: Settled submits remembered per process (about 200 bytes each).
SETTLED_SIZE = 4096


class Settled(NamedTuple):
    """A submit this process saw land: where its result is shown, and the fingerprints
    of what it was sent as (the raw values) and what it stored. Plain values only: never
    an ORM object, which belongs to the session of the request that read it."""

    url: str | None
    raw: str | None
    stored: str | None


class SettledMemory:
    """The last ``size`` settled submits, by digest; thread-safe."""

    def __init__(self, size: int = SETTLED_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, Settled] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, digest: str, settled: Settled) -> None:
        with self._lock:
            self._items[digest] = settled
            self._items.move_to_end(digest)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def get(self, digest: str) -> Settled | None:
        with self._lock:
            return self._items.get(digest)


@dataclass
class State:
    """What :meth:`SubmitOnce.init_app <flask_submit_once.SubmitOnce.init_app>` made for
    one app."""

    app: Flask
    store: TokenStore
    issuer: Issuer
    sessions: Sessions | None
    field: str
    wait: float
    redis_down_fallback: bool
    #: Signed tokens for forms drawn while Redis is away (SUBMIT_ONCE_SIGNED_WHEN_REDIS_AWAY).
    signed: SignedTokens | None = None
    settled: SettledMemory = dataclasses.field(default_factory=SettledMemory)
    local_limits: LocalLimits = dataclasses.field(default_factory=LocalLimits)
    #: When this process last issued signed tokens because Redis was away (None: it is not).
    degraded_since: float | None = None

    def setting(self, name: str) -> Any:
        """A setting read when it is used, so a test may change it on a live app."""
        return self.app.config[f"SUBMIT_ONCE_{name}"]


def state(app: Flask | None = None) -> State:
    """``app``'s (default: the current app's) state; a clear error before init_app."""
    found = (app or current_app).extensions.get(EXTENSION)
    if not isinstance(found, State):
        raise RuntimeError(
            "SubmitOnce is not set up on this app: call SubmitOnce(app) or "
            "submit_once.init_app(app) in the app factory."
        )
    return found
