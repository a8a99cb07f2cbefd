"""The rules production secrets follow, written once for the app (config.py) and
the refund worker (refunds/settings.py), and the bearer check of /metrics in both.

A secret is refused when it holds a public development secret, is shorter than
:data:`SECRET_MIN_BYTES` after stripping, repeats a pattern (its shortest period
is at most half its length: ``"ab" * 16``, ``"password" * 4``) or has fewer than
:data:`SECRET_MIN_DISTINCT` different characters (``"x" * 31 + "y"``). Cheap
stand-ins for entropy: a random ``secrets.token_hex(32)`` fails them about once in
10**12 (``token_hex(16)``, 32 characters, once in 10,000). Two secrets with one
value are refused too: whoever reads the metrics token (a monitoring system's
config) must not be able to sign sessions or payment events with it.

Messages name the setting, never its value. Checked once at start-up, so the
comparisons have no timing for anyone to observe.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any, Literal

__all__ = [
    "DEV_PROVIDER_SECRET",
    "DEV_SECRET_KEY",
    "DEV_WEBHOOK_SECRET",
    "SECRETS",
    "SECRET_MIN_BYTES",
    "SECRET_MIN_DISTINCT",
    "metrics_access",
    "refuse_weak_secrets",
    "weak_secret",
]

#: The only secrets the app accepts without being told them, and only with
#: APP_ENV=development or testing; production refuses them even when set.
DEV_SECRET_KEY = "dev-only-not-secret"
DEV_WEBHOOK_SECRET = "dev-webhook-secret"
#: The development payment provider's key (dev/provider.py uses the same by default).
DEV_PROVIDER_SECRET = "dev-provider-secret"
#: SECRET_KEY signs the session cookie, PAYMENT_WEBHOOK_SECRET the provider's events
#: ("paid"), METRICS_TOKEN opens /metrics (the app's and the refund worker's),
#: PAYMENT_PROVIDER_SECRET authenticates the checkout's charges to the provider.
SECRETS = ("SECRET_KEY", "PAYMENT_WEBHOOK_SECRET", "METRICS_TOKEN", "PAYMENT_PROVIDER_SECRET")
SECRET_MIN_BYTES = 32
SECRET_MIN_DISTINCT = 10
_HOW = "e.g. python -c 'import secrets; print(secrets.token_hex(32))'"


def refuse_weak_secrets(settings: Mapping[str, Any]) -> None:
    """Production starts only with strong secrets of its own: each of :data:`SECRETS`
    that is set must pass :func:`weak_secret`, and no two may be the same. Unset
    ones are skipped (the caller decides which are required; unset, the webhook
    and /metrics are off). Raises RuntimeError naming the setting."""
    given = {
        name: str(settings[name]).strip()
        for name in SECRETS
        if settings.get(name) not in (None, "")
    }
    for name, value in given.items():
        if weakness := weak_secret(value):
            raise RuntimeError(
                f"{name} {weakness}; set a random one of at least {SECRET_MIN_BYTES} bytes, "
                + _HOW
                + (
                    " (or the one your payment provider gave you)."
                    if name.startswith("PAYMENT_")
                    else "."
                )
            )
    names = list(given)
    for i, name in enumerate(names):
        for other in names[i + 1 :]:
            if given[name] == given[other]:
                raise RuntimeError(
                    f"{name} and {other} are the same value; each secret needs "
                    f"one of its own, {_HOW}."
                )


def weak_secret(value: str) -> str | None:
    """Why ``value`` is no secret, or None."""
    stripped = value.strip()
    if any(
        dev in stripped.lower() for dev in (DEV_SECRET_KEY, DEV_WEBHOOK_SECRET, DEV_PROVIDER_SECRET)
    ):
        return "contains a public development secret"
    size = len(stripped.encode())
    if size < SECRET_MIN_BYTES:
        return f"is {size} bytes; production needs at least {SECRET_MIN_BYTES}"
    period = _shortest_period(stripped)
    if period == 1:
        return "is one character repeated"
    if period <= len(stripped) // 2:
        return f"repeats a pattern of {period} characters"
    if (distinct := len(set(stripped))) < SECRET_MIN_DISTINCT:
        return (
            f"has only {distinct} different characters; production needs at least "
            f"{SECRET_MIN_DISTINCT}"
        )
    return None


def _shortest_period(text: str) -> int:
    """The smallest p with text[i] == text[i + p] throughout (the prefix function)."""
    border = [0] * len(text)
    for i in range(1, len(text)):
        k = border[i - 1]
        while k and text[i] != text[k]:
            k = border[k - 1]
        border[i] = k + (text[i] == text[k])
    return len(text) - border[-1] if text else 0


def metrics_access(
    token: str | None, environment: str, authorization: str
) -> Literal["open", "refused", "off"]:
    """Who may read /metrics: with ``token`` set, only an ``Authorization: Bearer
    <token>`` header ("open"; else "refused", a 401); unset, nobody in production
    ("off", a 404) and anyone in development and testing."""
    if not token:
        return "off" if environment == "production" else "open"
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return "open"
    return "refused"
