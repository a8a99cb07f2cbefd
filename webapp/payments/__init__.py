"""Card payments at checkout: the provider's client (:mod:`.client`), made once per app
from ``PAYMENT_PROVIDER_URL`` and ``PAYMENT_PROVIDER_SECRET``, and the order form's step
that charges the card once (:mod:`.checkout`).

Without ``PAYMENT_PROVIDER_URL`` the checkout charges nothing: the form has no card field
and an order waits for the provider's webhook, as before. ``flask payments reconcile``
(:mod:`.cli`) checks the money recorded against the orders.
"""

from __future__ import annotations

from flask import Flask, current_app

from .client import ProviderClient

__all__ = ["init_app", "provider"]

EXTENSION = "payments"


def init_app(app: Flask) -> None:
    """Make the provider's client (when a provider is set) and register the commands."""
    from .cli import payments

    app.cli.add_command(payments)
    url = app.config.get("PAYMENT_PROVIDER_URL")
    if not url:
        return
    app.extensions[EXTENSION] = ProviderClient(
        url,
        app.config["PAYMENT_PROVIDER_SECRET"],
        timeout=float(app.config["PAYMENT_PROVIDER_TIMEOUT"]),
        retries=int(app.config["PAYMENT_PROVIDER_RETRIES"]),
    )


def provider() -> ProviderClient | None:
    """The current app's provider client; None when the checkout charges no card."""
    client: ProviderClient | None = current_app.extensions.get(EXTENSION)
    return client
