"""Arbitrary bodies to every form, the JSON API and the signed webhook, on the real
PostgreSQL and Redis: never a 500, a 4xx of the API or the webhook is a problem
document, and nothing takes effect twice (one order, refund request or event per
token, key or event id, however often the same body is sent).

The bodies mix what users, scripts and attackers send: url-encoded and multipart forms
whose fields may be files, repeated, missing, huge or full of control characters; JSON
of any shape (``fetch()`` with the tokens in headers), nested 20,000 deep, or numbers
past ``int()``'s 4,300 digits; and raw bytes under any content type.

Bounded: ``FUZZ_EXAMPLES`` examples a test (15 by default: 2-4 s each, two requests an
example). The long
form: ``FUZZ_EXAMPLES=1000 python -m pytest tests/app/test_fuzz.py``. Each test prints the
statuses it saw.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from werkzeug.datastructures import MultiDict

from tests.conftest import VALID, hidden, order_count
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import ORDER, new_api_key
from tests.webhooks.test_webhooks import SECRET, deliver, paid, reference_of
from webapp.webhooks.signatures import sign

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)

SCRIPT = '<script>alert("x")</script>'
#: Values no browser sends: int()'s digit limit, control characters, a NUL, other digits.
ODD_TEXT = st.sampled_from(
    [
        "0" * 5000 + "1",
        "9" * 5000,
        "1e999999",
        "\x00",
        "\x1b[2J",
        " José ",
        "١٠",
        "-1",
        "NaN",
        SCRIPT,
    ]
)
TEXT = st.text(max_size=40) | ODD_TEXT
#: Bodies that break parsers: too deep for json.loads (RecursionError), a JSON number
#: past int()'s limit (ValueError), not UTF-8, empty, a multipart part without a name.
SHALLOW_ODD_BODIES = st.sampled_from(
    [
        b"1" * 5000,
        b'{"amount_cents": ' + b"9" * 5000 + b"}",
        b"\xff\xfe",
        b"",
        b"null",
        b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n",
    ]
)
ODD_JSON_BODIES = SHALLOW_ODD_BODIES | st.sampled_from(
    [b"[" * 20_000 + b"]" * 20_000, b'{"a":' * 20_000 + b"1" + b"}" * 20_000]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
#: What a header can carry (the test client refuses line breaks, as HTTP does).
HEADER_TEXT = TEXT.filter(lambda value: "\n" not in value and "\r" not in value)
FIELD_NAMES = st.sampled_from(
    ["product", "quantity", "name", "email", "address", "amount", "form_token", "csrf_token", "x"]
) | st.text(max_size=8)
CONTENT_TYPES = st.sampled_from(
    [
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "multipart/form-data; boundary=b",
        "application/json",
        "text/plain",
        "application/xml",
        "",
    ]
)


def mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five, else ``other``: most requests get past the first
    check, so the later ones are fuzzed too."""
    return st.integers(0, 4).flatmap(lambda n: usual if n < 4 else other)


MOSTLY_TRUE = mostly(st.just(True), st.just(False))


def mostly_none(other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return mostly(st.none(), other)


#: The long form takes longer than pytest's 120 s a test (0.6 s an example on 2 busy cores).
# scripts/soak runs the long form (FUZZ_EXAMPLES=500)
pytestmark = [pytest.mark.soak, pytest.mark.timeout(max(120, EXAMPLES * 2))]


def report(capsys: pytest.CaptureFixture[str], name: str, seen: Counter[int]) -> None:
    """The statuses a test saw, printed where they are seen (not into the capture)."""
    with capsys.disabled():
        print(
            f"\nfuzz {name}: {EXAMPLES} examples, {sum(seen.values())} requests, "
            f"statuses {dict(sorted(seen.items()))}"
        )


@pytest.fixture
def app(make_app):
    # No issuance caps: the long form opens thousands of forms from one address.
    return make_app(
        PAYMENT_WEBHOOK_SECRET=SECRET,
        SUBMIT_ONCE_MAX_FORMS_PER_SESSION=0,
        SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=0,
    )


# --- the HTML forms ----------------------------------------------------------------------


def form_body(raw: st.SearchStrategy[bytes]) -> st.SearchStrategy[dict[str, Any]]:
    """A form body: how it is sent, which of the page's tokens it keeps, the real fields
    or not, and extra pairs (a value may be a file part when sent as multipart)."""
    return st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["urlencoded", "multipart", "json", "raw"]),
            # Mostly everything the page gave: the body then reaches the form's validation.
            "keep": mostly(
                st.just(frozenset(["csrf_token", "form_token", "fields"])),
                st.sets(st.sampled_from(["csrf_token", "form_token", "fields"])),
            ),
            # Each pair replaces the field of that name, or (one in five) is sent beside it.
            "pairs": st.lists(
                st.tuples(
                    FIELD_NAMES,
                    TEXT | st.binary(max_size=40).map(lambda content: ("file", content)),
                    MOSTLY_TRUE,
                ),
                max_size=6,
            ),
            "json": mostly(st.dictionaries(FIELD_NAMES, mostly(TEXT, JSON), max_size=4), JSON),
            "raw": raw,
            "content_type": CONTENT_TYPES,
        }
    )


def send_form(
    client, path: str, tokens: dict[str, str], fields: dict[str, str], body: dict[str, Any]
):
    """POST ``body`` (a :func:`form_body`) to ``path``, as the page with ``tokens`` would not."""
    kept = {k: v for k, v in tokens.items() if k in body["keep"]}
    if "fields" in body["keep"]:
        kept.update(fields)
    if body["kind"] == "json":
        headers = {
            "X-CSRFToken": kept.pop("csrf_token", ""),
            "X-Submit-Once-Token": kept.pop("form_token", ""),
        }
        payload = {**kept, **body["json"]} if isinstance(body["json"], dict) else body["json"]
        return client.post(
            path,
            data=json.dumps(payload),
            content_type="application/json",
            headers={k: v for k, v in headers.items() if v},
        )
    if body["kind"] == "raw":
        return client.post(path, data=body["raw"], content_type=body["content_type"])
    data: MultiDict[str, object] = MultiDict(kept)
    for name, value, replace in body["pairs"]:
        # a file part; as plain text in a url-encoded body
        if isinstance(value, tuple):
            value = (
                (io.BytesIO(value[1]), "part.bin")
                if body["kind"] == "multipart"
                else value[1].decode("latin-1")
            )
        if replace:
            data.pop(name, None)
        data.add(name, value)
    content_type = (
        "multipart/form-data"
        if body["kind"] == "multipart"
        else "application/x-www-form-urlencoded"
    )
    return client.post(path, data=data, content_type=content_type)


def count(servers, table: str) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text(f"SELECT count(*) FROM {table}"))


def test_any_order_form_body_gets_a_4xx_page_or_one_order_never_a_500(app, servers, capsys):
    seen: Counter[int] = Counter()

    @FUZZ
    @given(body=form_body(st.binary(max_size=300) | ODD_JSON_BODIES))
    def one(body: dict[str, Any]) -> None:
        client = app.test_client()
        tokens = open_form(client)
        before = order_count(servers)
        # the same body twice: the second never places another order
        for _ in range(2):
            response = send_form(client, "/orders", tokens, VALID, body)
            seen[response.status_code] += 1
            assert response.status_code < 500, response.get_data(as_text=True)[:600]
            assert order_count(servers) - before <= 1

    one()
    report(capsys, "order form", seen)


def paid_order(client, servers) -> str:
    order = order_path(submit(client, open_form(client)))
    assert deliver(client, paid(reference_of(servers, order), f"evt_{order}")).status_code == 200
    return order


def page_tokens(client, path: str) -> dict[str, str] | None:
    page = client.get(path)
    html = page.get_data(as_text=True)
    # Refunded in full ("Nothing more to refund", no form), or cancelled, by an earlier example.
    if page.status_code != 200 or 'name="form_token"' not in html:
        return None
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def test_any_refund_or_cancel_body_gets_a_4xx_page_or_takes_effect_once(app, servers, capsys):
    seen: Counter[int] = Counter()
    orders: list[str] = []

    @FUZZ
    @given(
        form=st.sampled_from(["refund", "cancel"]),
        body=form_body(st.binary(max_size=300) | ODD_JSON_BODIES),
        amount=st.sampled_from(["1", "0.50", "36"]) | TEXT,
    )
    def one(form: str, body: dict[str, Any], amount: str) -> None:
        client = app.test_client()
        page, submit_to = {
            "refund": ("/refund", "/refunds"),
            "cancel": ("/cancel", "/cancellation"),
        }[form]
        tokens = page_tokens(client, orders[-1] + page) if orders else None
        if tokens is None:
            orders.append(paid_order(client, servers))
            tokens = page_tokens(client, orders[-1] + page)
        assert tokens is not None
        before = count(servers, "refund_requests")
        for _ in range(2):
            response = send_form(client, orders[-1] + submit_to, tokens, {"amount": amount}, body)
            seen[response.status_code] += 1
            assert response.status_code < 500, response.get_data(as_text=True)[:600]
            assert count(servers, "refund_requests") - before <= 1

    one()
    report(capsys, f"refund and cancel forms ({len(orders)} orders)", seen)


# --- the JSON API and the webhook --------------------------------------------------------


def some_fields(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[object]:
    """Mostly every field (each mostly its usual value), else some of them, else any JSON."""
    return mostly(
        st.fixed_dictionaries(fields), mostly(st.fixed_dictionaries({}, optional=fields), JSON)
    )


#: Order bodies: the real fields, each kept or replaced by any JSON.
API_BODY = some_fields({name: mostly(st.just(value), JSON) for name, value in ORDER.items()})


def is_problem(response) -> bool:
    return response.status_code < 400 or response.mimetype == "application/problem+json"


def test_any_api_request_gets_a_problem_or_one_order_never_a_500(client, servers, capsys):
    api_key = new_api_key(servers)
    seen: Counter[int] = Counter()

    @FUZZ
    @given(
        body=API_BODY,
        raw=mostly_none(ODD_JSON_BODIES | st.binary(max_size=200)),
        content_type=mostly(st.just("application/json"), CONTENT_TYPES),
        key=mostly(st.uuids().map(str), HEADER_TEXT),
        authorised=MOSTLY_TRUE,
    )
    def one(body: object, raw: bytes | None, content_type: str, key: str, authorised: bool) -> None:
        data = raw if raw is not None else json.dumps(body)
        headers = {
            "Idempotency-Key": key,
            "Authorization": f"Bearer {api_key if authorised else 'x' * 40}",
        }
        before = order_count(servers)
        # a retry with the same key never places a second order
        for _ in range(2):
            response = client.post(
                "/api/orders", data=data, content_type=content_type, headers=headers
            )
            seen[response.status_code] += 1
            assert response.status_code < 500, response.get_data(as_text=True)[:600]
            assert is_problem(response), response.mimetype
            assert order_count(servers) - before <= 1

    one()
    report(capsys, "JSON API", seen)


def event_body(reference: str) -> st.SearchStrategy[object]:
    """Events close to real ones (the order's reference, known types) and any JSON."""
    fields = {
        "id": mostly(st.uuids().map(lambda u: f"evt_{u}"), TEXT),
        "type": mostly(st.sampled_from(["payment.succeeded", "refund.succeeded"]), TEXT),
        "order_id": mostly(st.just(reference), TEXT),
        "amount_cents": mostly(st.sampled_from([1, 3600, 10**12]), JSON),
        "currency": mostly(st.sampled_from(["EUR", "usd"]), JSON),
    }
    return some_fields(fields)


def test_any_signed_webhook_body_gets_a_problem_or_takes_effect_once_never_a_500(
    client, servers, capsys
):
    reference = reference_of(servers, order_path(submit(client, open_form(client))))
    seen: Counter[int] = Counter()

    @FUZZ
    @given(
        data=st.data(),
        raw=mostly_none(ODD_JSON_BODIES | st.binary(max_size=200)),
        signed=MOSTLY_TRUE,
        header=HEADER_TEXT,
    )
    def one(data: st.DataObject, raw: bytes | None, signed: bool, header: str) -> None:
        body = raw if raw is not None else json.dumps(data.draw(event_body(reference))).encode()
        before = count(servers, "payment_events")
        # a redelivery is never a second event
        for _ in range(2):
            response = deliver(
                client, {}, body=body, signature=sign(SECRET, body) if signed else header
            )
            seen[response.status_code] += 1
            assert response.status_code < 500, response.get_data(as_text=True)[:600]
            assert is_problem(response), response.mimetype
            assert count(servers, "payment_events") - before <= 1

    one()
    report(capsys, "webhook", seen)
