"""The dev payment provider's state: one journal file (JSON Lines) behind an exclusive lock.

Every change is a line appended while holding ``flock`` on the file; before reading, a
process applies the lines others appended since it last looked. So two provider processes,
a restart, or a test reading the file all see one provider. The check-and-charge of an
idempotency key happens under that lock: two requests with one key cannot both charge.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CARDS", "FAULTS", "KEY_SECONDS", "Journal", "State", "fingerprint", "luhn_ok", "new_id"]

#: Test card numbers and what charging them does; any other number that passes the Luhn
#: check pays, one that fails it is refused when it is tokenized.
CARDS = {
    "4242424242424242": "succeeds",
    "5555555555554444": "succeeds",
    # generic_decline
    "4000000000000002": "declined",
    # declined, another reason
    "4000000000009995": "insufficient_funds",
    # 503 processing_error once per key, then pays
    "4000000000000119": "retry",
}
#: How long an idempotency key is kept: a repeat within it gets the first answer.
KEY_SECONDS = 24 * 3600
FAULTS = ("slow", "drop_after_charge", "fail_before_charge", "fail_after_charge")


def luhn_ok(number: str) -> bool:
    digits = [int(d) for d in reversed(number)]
    total = sum(
        d if i % 2 == 0 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(digits)
    )
    return 12 <= len(number) <= 19 and total % 10 == 0


def fingerprint(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass
class State:
    """What the journal says, replayed."""

    payment_methods: dict[str, dict[str, Any]] = field(default_factory=dict)
    charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: key -> {"fingerprint", "status", "body", "at"}: the answer a repeat gets.
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: key -> attempts that failed on a "retry" card
    attempts: dict[str, int] = field(default_factory=dict)
    faults: dict[str, float] = field(default_factory=dict)
    clock_offset: float = 0.0
    #: charge requests received, in all and per idempotency key
    requests: int = 0
    requests_per_key: dict[str, int] = field(default_factory=dict)

    def now(self) -> float:
        return time.time() + self.clock_offset

    def apply(self, record: dict[str, Any]) -> None:
        kind = record["t"]
        if kind == "pm":
            self.payment_methods[record["pm"]["id"]] = record["pm"]
        elif kind == "charge":
            self.charges[record["charge"]["id"]] = record["charge"]
        elif kind == "key":
            self.keys[record["key"]] = record["answer"]
        elif kind == "req":
            self.requests += 1
            if record["key"]:
                key = record["key"]
                self.requests_per_key[key] = self.requests_per_key.get(key, 0) + 1
        elif kind == "attempt":
            self.attempts[record["key"]] = self.attempts.get(record["key"], 0) + 1
        elif kind == "faults":
            self.faults = {k: v for k, v in record["faults"].items() if v}
        elif kind == "clock":
            self.clock_offset = record["offset"]

    def answer_for(self, key: str) -> dict[str, Any] | None:
        """The stored answer of ``key``, if it is younger than KEY_SECONDS."""
        answer = self.keys.get(key)
        if answer is None or self.now() - answer["at"] > KEY_SECONDS:
            return None
        return answer


class Journal:
    """The provider's file; ``with journal.locked() as (state, append):`` reads it up to
    date and appends changes, holding the lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self.state = State()
        self._offset = 0
        # one fd, shared by this process's threads
        self._threads = threading.Lock()

    @contextmanager
    def locked(self) -> Iterator[tuple[State, Any]]:
        with self._threads, open(self.path, "a+b") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                self._catch_up(file)

                def append(record: dict[str, Any]) -> None:
                    line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
                    file.write(line)
                    file.flush()
                    self._offset += len(line)
                    self.state.apply(record)

                yield self.state, append
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)

    def read(self) -> State:
        with self.locked() as (state, _):
            return state

    def _catch_up(self, file: Any) -> None:
        file.seek(self._offset)
        for line in file.read().splitlines(keepends=True):
            if not line.endswith(b"\n"):
                # A write cut short by a crash (the lock is ours: nobody is writing it):
                # not a record, and the next one must start on a line of its own.
                file.truncate(self._offset)
                break
            self._offset += len(line)
            self.state.apply(json.loads(line))
        file.seek(0, os.SEEK_END)
