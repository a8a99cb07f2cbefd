"""Schemathesis against the OpenAPI document, every check, on the real PostgreSQL and
Redis: generated requests (valid and invalid) never get a 500, every response matches
the document, a request the document admits is accepted, one it refuses is refused,
and the stateful phase follows the document's links from a placed order to its page
and its cancel.

Bounded: the fuzzing phase with ``FUZZ_EXAMPLES`` examples an operation and a few short
stateful scenarios (about 15 s in all). The long form, e.g. ``FUZZ_EXAMPLES=300 python -m
pytest tests/api/test_api_schema.py``; the CLI against a running app:
``schemathesis run http://127.0.0.1:5000/api/openapi.json --checks all -H
"Authorization: Bearer $KEY"``.
"""

from __future__ import annotations

import re

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from sqlalchemy import text

from tests.app.test_fuzz import EXAMPLES
from tests.conftest import reset_state
from tests.support.api_client import ORDER, new_api_key
from tests.webhooks.test_webhooks import SECRET
from webapp.api.idempotency import KEY_PATTERN, parse_key
from webapp.api.openapi import openapi
from webapp.cli import CATALOGUE
from webapp.webhooks.signatures import HEADER_PATTERN, sign

# the seeded catalogue, all on sale
SKUS = [item["sku"] for item in CATALOGUE]

#: Every check; the fuzzing phase and the stateful one (short scenarios).
CONFIG = {
    # ASCII text, where the document's patterns are exactly the code's rules; past it the
    # code refuses more (str.isprintable: format characters, unassigned code points)
    # than a pattern of a sane size can say, and tests/app/test_fuzz.py sends any Unicode.
    "generation": {"codec": "ascii"},
    "phases": {
        "examples": {"enabled": False},
        "coverage": {"enabled": False},
        "stateful": {"max-steps": 5},
    },
    # A schema cannot carry an HMAC or the payment references orders hold now: a signed
    # webhook with a valid body is tested by tests/app/test_fuzz.py and test_webhooks.py.
    "operations": [
        {
            "include-operation-id": "paymentEvent",
            "checks": {"positive_data_acceptance": {"enabled": False}},
        }
    ],
}
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
#: The long form takes longer than pytest's 120 s a test.
# scripts/soak runs the long form (FUZZ_EXAMPLES=500)
pytestmark = [pytest.mark.soak, pytest.mark.timeout(max(120, EXAMPLES * 2))]


class RunningApp:
    """The app of the running test, as one WSGI callable: schemathesis takes its app
    when the schema is loaded (at import, before any fixture made one), and its probes
    (ignored_auth) send to that app, whatever a test passes to ``call``."""

    app: Flask | None = None

    def __call__(self, environ, start_response):
        assert self.app is not None, "no test app: use the app fixture"
        return self.app(environ, start_response)


RUNNING = RunningApp()
# The document the app serves (test_api checks /api/openapi.json is this one).
schema = schemathesis.openapi.from_dict(
    openapi(24 * 3600, SKUS), config=SchemathesisConfig.from_dict(CONFIG)
)
schema.app = RUNNING
#: The API key of the running test's client.
API_KEY: dict[str, str] = {}


@schema.auth(refresh_interval=None)
class BearerKey:
    """The document's bearer scheme, given as schemathesis' own auth, so that it also
    sends requests without a key and with a wrong one (ignored_auth)."""

    def get(self, case, context) -> str:
        return API_KEY["key"]

    def set(self, case, data: str, context) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture
def app(make_app, servers, monkeypatch):
    """An app on the test servers, and a fresh API key, for the schema's requests."""
    monkeypatch.setitem(API_KEY, "key", new_api_key(servers))
    app = make_app(PAYMENT_WEBHOOK_SECRET=SECRET)
    monkeypatch.setattr(RUNNING, "app", app)
    return app


@schema.parametrize()
@SETTINGS
def test_generated_requests_get_no_server_error_and_match_the_document(case, app, servers):
    if case.operation.label == "POST /api/orders":
        # On an empty shop: a key a former example used with another body is rightly a
        # 422, which the document cannot foresee.
        reset_state(servers)
    case.call_and_validate()


def test_the_stateful_phase_follows_the_links_to_the_order_and_its_cancel(app, servers):
    reached: set[str] = set()

    class Scenarios(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # each scenario on an empty shop, as above
            reset_state(servers)

        def after_call(self, response, case):
            super().after_call(response, case)
            if response.status_code < 300:
                reached.add(case.operation.label)

    Scenarios.run(
        settings=settings(SETTINGS, max_examples=max(3, EXAMPLES // 5), stateful_step_count=5)
    )
    assert {"GET /api/orders/{order_id}", "POST /api/orders/{order_id}/cancel"} <= reached, reached


# --- the document states the code's rules, not looser ones -------------------------------


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("order-1", True),
        ('"order-1"', True),
        ('"with \\"quotes\\""', True),
        ("  k  ", True),
        ("x" * 255, True),
        ('"' + "y" * 255 + '"', True),
        ('"unterminated', False),
        ('" "', False),
        ('""', False),
        ("", False),
        ("\t", False),
        ("a,b", False),
        ("x" * 256, False),
        ("schlüssel", False),
    ],
)
def test_the_idempotency_key_pattern_is_the_rule_the_code_applies(value, accepted):
    """One pattern for both (webapp.api.idempotency): a key starting with a quote, or a
    quoted key of blanks, was admitted by the document and refused by the code."""
    assert (parse_key(value) is not None) is accepted
    assert (
        openapi(60, SKUS)["paths"]["/api/orders"]["post"]["parameters"][0]["schema"]["pattern"]
        == KEY_PATTERN
    )


def test_the_served_document_names_the_skus_on_sale_now(client, servers):
    """A product taken off sale is refused (422), so the document leaves it out."""

    def product_enum() -> list[str]:
        document = client.get("/api/openapi.json").get_json()
        return document["components"]["schemas"]["OrderRequest"]["properties"]["product"]["enum"]

    assert product_enum() == SKUS and ORDER["product"] in SKUS
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET active = false WHERE sku = 'POT-CAST'"))
    assert product_enum() == [sku for sku in SKUS if sku != "POT-CAST"]


def test_the_signature_pattern_is_what_sign_writes_and_an_empty_one_is_outside_it():
    assert re.fullmatch(HEADER_PATTERN, sign(SECRET, b"{}"))
    assert not re.fullmatch(HEADER_PATTERN, "")
