"""The card provider's settings: off by default, and safe in production when on."""

from __future__ import annotations

import pytest

from webapp.config import DEV_PROVIDER_SECRET, finish

STRONG = "k" * 20 + "0123456789abcdef"
# a secret of its own: no two secrets alike
PROVIDERS = "p" * 20 + "fedcba9876543210"


def production(**settings: object) -> dict[str, object]:
    return {
        "APP_ENV": "production",
        "SECRET_KEY": STRONG,
        "DATABASE_URL": "postgresql://x",
        "REDIS_URL": "redis://x",
        **settings,
    }


def test_without_a_url_the_checkout_charges_no_card():
    config = production()
    finish(config)
    assert config["PAYMENT_PROVIDER_URL"] is None


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"PAYMENT_PROVIDER_URL": "http://pay.example"}, "https://"),
        ({"PAYMENT_PROVIDER_URL": "https://pay.example"}, "PAYMENT_PROVIDER_SECRET is not"),
        (
            {"PAYMENT_PROVIDER_URL": "https://pay.example", "PAYMENT_PROVIDER_SECRET": "short"},
            "PAYMENT_PROVIDER_SECRET is 5 bytes",
        ),
        (
            {
                "PAYMENT_PROVIDER_URL": "https://pay.example",
                "PAYMENT_PROVIDER_SECRET": DEV_PROVIDER_SECRET + STRONG,
            },
            "development secret",
        ),
        ({"PAYMENT_PROVIDER_URL": "ftp://pay.example"}, "http(s) URL"),
    ],
)
def test_production_refuses_a_provider_it_cannot_trust(settings, says):
    with pytest.raises(RuntimeError, match=says.replace("(", r"\(").replace(")", r"\)")):
        finish(production(**settings))


def test_production_accepts_https_with_its_own_secret_and_a_provider_on_this_machine():
    for url in ("https://pay.example", "http://127.0.0.1:8765"):
        config = production(PAYMENT_PROVIDER_URL=url, PAYMENT_PROVIDER_SECRET=PROVIDERS)
        finish(config)
        assert config["PAYMENT_PROVIDER_SECRET"] == PROVIDERS


def test_development_uses_the_dev_providers_secret():
    config = {**production(APP_ENV="development"), "PAYMENT_PROVIDER_URL": "http://127.0.0.1:1"}
    finish(config)
    assert config["PAYMENT_PROVIDER_SECRET"] == DEV_PROVIDER_SECRET
