"""Signed webhook deliveries: HMAC-SHA256 over timestamp and body.

    Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>

Signing the timestamp with the body means an old delivery cannot be replayed
with a fresh time, and the tolerance (5 minutes) bounds how long a captured
delivery is any use at all; within it, the event id makes a replay a no-op.
Framework-free: the provider script signs with the same module.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = [
    "HEADER",
    "HEADER_PATTERN",
    "MAX_HEADER_LENGTH",
    "TOLERANCE_SECONDS",
    "BadSignature",
    "sign",
    "verify",
]

HEADER = "Payment-Signature"
TOLERANCE_SECONDS = 300
MAX_HEADER_LENGTH = 1000
#: The header as :func:`sign` writes it (the OpenAPI document publishes it). ``verify``
#: also takes blanks around the parts and several ``v1=`` (a provider rotating secrets).
HEADER_PATTERN = r"^t=[0-9]{1,12},v1=[0-9a-f]{64}$"


class BadSignature(ValueError):
    """The delivery is not provably from the provider, or is too old."""


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The header value for delivering ``body`` now (or at ``timestamp``)."""
    moment = int(time.time()) if timestamp is None else timestamp
    return f"t={moment},v1={_mac(secret, moment, body)}"


def verify(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    tolerance: int = TOLERANCE_SECONDS,
    now: float | None = None,
) -> None:
    """Raise :class:`BadSignature` unless ``header`` signs ``body`` and is recent."""
    if not header or len(header) > MAX_HEADER_LENGTH:
        raise BadSignature(f"missing {HEADER} header")
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    stamps = parts.get("t", [])
    if (
        len(stamps) != 1
        or not stamps[0].isascii()
        or not stamps[0].isdigit()
        or len(stamps[0]) > 12
    ):
        raise BadSignature("no valid t= timestamp")
    timestamp = int(stamps[0])
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise BadSignature("timestamp outside the tolerance (old or replayed delivery)")
    expected = _mac(secret, timestamp, body)
    # compare_digest: the time taken does not tell an attacker how much matched.
    if not any(
        hmac.compare_digest(expected.encode(), given.encode())
        for given in parts.get("v1", [])
        if given.isascii()
    ):
        raise BadSignature("signature does not match")
