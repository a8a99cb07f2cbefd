"""Security by default: headers, cookies, tokens kept out of logs and compared
in constant time, Redis memory bounded, and no way into someone else's order."""

from __future__ import annotations

import ast
import base64
import logging
import re
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.app.test_hardening import KEY
from tests.conftest import VALID, hidden, order_count, token_keys
from tests.support.pauses import after_consume
from webapp.orders import EXPIRED, FORM
from webapp.request_log import json_lines

# in scripts/test --quick
pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]


def open_form(client) -> dict[str, str]:
    html = client.get("/orders/new").get_data(as_text=True)
    return {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}


def submit(client, tokens, **fields):
    return client.post("/orders", data={**VALID, **tokens, **fields})


PAGES = {
    "form": lambda c: c.get("/orders/new"),
    "confirmation": lambda c: c.get(submit(c, open_form(c)).headers["Location"]),
    "invalid-fields-422": lambda c: submit(c, open_form(c), quantity="0"),
    "bad-token-400": lambda c: submit(c, {**open_form(c), "form_token": "x"}),
    "not-found-404": lambda c: c.get("/orders/nope"),
    "method-405": lambda c: c.put("/orders"),
    "too-large-413": lambda c: c.post("/orders", data={"address": "x" * 70_000}),
}


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("page", PAGES.values(), ids=PAGES.keys())
def test_every_page_carries_strict_headers_and_hsts_only_over_https(make_app, page, scheme):
    # the test client's scheme
    client = make_app(PREFERRED_URL_SCHEME=scheme).test_client()
    client.environ_base["HTTP_REFERER"] = f"{scheme}://localhost/orders/new"
    headers = page(client).headers
    csp = dict(part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["frame-ancestors"] == "'none'"
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert ("Strict-Transport-Security" in headers) == (scheme == "https")


@pytest.mark.parametrize(
    "referer, status",
    [
        # what a browser sends under same-origin
        ("https://localhost/orders/new", 303),
        # what it sent under no-referrer
        (None, 400),
        # another site's form
        ("https://evil.example/orders/new", 400),
    ],
)
def test_over_https_the_form_posts_only_with_our_own_referer(make_app, servers, referer, status):
    client = make_app(PREFERRED_URL_SCHEME="https").test_client()
    tokens = open_form(client)
    headers = {"Referer": referer} if referer else {}
    response = client.post("/orders", data={**VALID, **tokens}, headers=headers)
    assert response.status_code == status
    assert order_count(servers) == (status == 303)


def test_templates_have_no_inline_scripts_styles_or_handlers():
    # The CSP forbids them; this says which template broke it before a browser does.
    inline = re.compile(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", re.I)
    for template in (ROOT / "templates").rglob("*.html"):
        assert not inline.search(template.read_text()), template


def test_session_cookie_is_httponly_lax_and_secure_in_production(make_app):
    app = make_app(APP_ENV="production", SECRET_KEY=KEY, PREFERRED_URL_SCHEME="https")
    client = app.test_client()
    cookie = client.get("/orders/new").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie


def test_form_tokens_are_a_128_bit_random_nonce_and_a_128_bit_mac(client):
    tokens = {open_form(client)["form_token"] for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(base64.urlsafe_b64decode(t + "=")) == 32 for t in tokens)
    assert len({base64.urlsafe_b64decode(t + "=")[:16] for t in tokens}) == 20


def test_no_token_csrf_value_or_session_id_is_ever_logged(make_app, servers, caplog):
    caplog.set_level(logging.DEBUG)
    app = make_app()
    client = app.test_client()
    secrets_seen: set[str] = set()

    def form() -> dict[str, str]:
        tokens = open_form(client)
        secrets_seen.update(tokens.values())
        return tokens

    first = form()
    # placed
    submit(client, first)
    # duplicate
    submit(client, first)
    # invalid fields
    submit(client, form(), quantity="0")
    # unknown token
    submit(client, {**form(), "form_token": "a" * 43})
    servers_engine = servers.engine

    def connection_lost():
        with servers_engine.begin() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()"
                )
            )

    after_consume(app, connection_lost)
    # database lost mid-submit
    assert submit(client, form()).status_code == 503
    after_consume(app, None)
    with client.session_transaction() as session:
        secrets_seen.add(session["_submit_once_sid"])
    digests = {
        app.extensions["submit_once"].store.digest(
            t, session_id=session["_submit_once_sid"], form=FORM
        )
        for t in secrets_seen
    }

    # Every line with everything it carries: as JSON lines, extra fields included.
    as_json = json_lines()
    logged = "\n".join(f"{as_json.format(r)} {r.exc_text or ''}" for r in caplog.records)
    assert '"outcome":"created"' in logged and "order not placed" in logged
    # digests appear only as a 12-character prefix
    for secret in secrets_seen | digests:
        assert secret not in logged
    assert VALID["email"] not in logged and "Lovelace" not in logged


def _secret_name(node: ast.AST) -> bool:
    name = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else node.slice.value
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
        else ""
    )
    return bool(re.search(r"token|secret|digest|csrf|password|signature|sid\b", str(name), re.I))


def test_secrets_are_never_compared_with_equals_in_python():
    """== on a secret leaks how many leading characters matched; hmac.compare_digest
    does not. (Lookups inside SQL ``where`` clauses are the database's, by index.)"""
    offenders = []
    for module in (ROOT / "webapp").rglob("*.py"):
        tree = ast.parse(module.read_text())
        in_sql = {
            id(n)
            for call in ast.walk(tree)
            if isinstance(call, ast.Call)
            and getattr(call.func, "attr", "") in ("where", "filter", "filter_by")
            for arg in call.args
            for n in ast.walk(arg)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Compare)
                and id(node) not in in_sql
                and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
                and any(_secret_name(side) for side in [node.left, *node.comparators])
            ):
                offenders.append(f"{module.name}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize(
    "cap, commands",
    [
        (0, {"set": 1, "getdel": 1}),
        # The session's count rides in the SET's one command: a script (its counter and TTL
        # were made at the session's second form, which counted the first too).
        (200, {"evalsha": 1, "get": 1, "incrby": 1, "set": 1, "getdel": 1}),
    ],
)
def test_happy_path_costs_one_command_to_render_and_one_getdel_in_redis(
    make_app, rdb, cap, commands
):
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_SESSION=cap).test_client()
    # the app's connection is open (CLIENT SETINFO is done)
    client.get("/orders/new")
    # and the session's count exists
    client.get("/orders/new")
    rdb.config_resetstat()
    tokens = open_form(client)
    assert submit(client, tokens).status_code == 303
    calls = {
        name.removeprefix("cmdstat_"): stat["calls"]
        for name, stat in rdb.info("commandstats").items()
    }
    calls = {k: v for k, v in calls.items() if k not in ("config", "info", "config|resetstat")}
    assert calls == commands


def test_a_live_token_costs_at_most_120_bytes_in_redis(client, rdb):
    open_form(client), open_form(client)
    tokens = token_keys(rdb)
    counts = rdb.keys("so:issued:*")
    # the session cap's count: one per session
    assert len(tokens) == 2 and len(counts) == 1
    assert all(rdb.memory_usage(key, samples=0) <= 120 for key in tokens + counts)


def test_reloading_the_form_past_the_cap_is_refused_with_a_page_and_adds_no_key(
    make_app, rdb, stopped_clock
):
    """The cap counts per hour of the clock (the token TTL): the clock is stopped, so
    the six views fall in one hour and the next hour is a new window."""
    stopped_clock(0)
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_SESSION=5).test_client()
    live = [open_form(client) for _ in range(5)]
    refused = client.get("/orders/new")
    html = refused.get_data(as_text=True)
    assert refused.status_code == 429 and "Too many forms opened" in html
    assert "A form you already have open in another tab still works." in html
    assert refused.headers["Retry-After"] == "3600"
    assert len(token_keys(rdb)) == 5
    # the open forms still work
    assert submit(client, live[2]).status_code == 303
    # an hour later: a new window
    stopped_clock(3600)
    assert client.get("/orders/new").status_code == 200


def test_the_cap_is_counted_in_redis_where_the_client_cannot_reset_it(make_app, rdb, stopped_clock):
    """No counter cookie to drop, forge or swap with another session's: the count is
    kept in Redis under a digest of the session id, which never reaches Redis itself."""
    # the views in one hour's window
    stopped_clock(0)
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_SESSION=2).test_client()
    first = client.get("/orders/new")
    assert [c.split("=")[0] for c in first.headers.getlist("Set-Cookie")] == ["session"]
    open_form(client)
    assert client.get("/orders/new").status_code == 429
    with client.session_transaction() as session:
        sid = session["_submit_once_sid"]
    assert not any(sid in key for key in rdb.keys("*"))
    # Another session has its own count.
    assert (
        make_app(SUBMIT_ONCE_MAX_FORMS_PER_SESSION=2).test_client().get("/orders/new").status_code
        == 200
    )


THIEF = {"name": "Eve", "email": "eve@example.com", "address": "1 Elsewhere"}


def test_a_stolen_token_never_leads_to_its_owners_order(app, servers):
    owner, thief = app.test_client(), app.test_client()
    tokens = open_form(owner)
    consumed, release = threading.Event(), threading.Event()
    after_consume(app, lambda: (consumed.set(), release.wait(10)))
    placing = threading.Thread(target=lambda: submit(owner, tokens))
    placing.start()
    try:
        assert consumed.wait(10)
        # While the owner's submit is in flight, and after: the thief's session
        # names another key and another lock, so it neither waits nor lands.
        stolen = {**open_form(thief), "form_token": tokens["form_token"]}
        during = submit(thief, stolen, **THIEF)
    finally:
        release.set()
        placing.join(10)
    after_consume(app, None)
    after = submit(thief, stolen, **THIEF)
    with servers.engine.connect() as conn:
        public_id = conn.scalar(text("SELECT public_id FROM orders"))
    for response in (during, after):
        html = response.get_data(as_text=True)
        assert response.status_code == 409 and EXPIRED in html
        assert "Location" not in response.headers
        assert public_id not in html and VALID["email"] not in html and "Lovelace" not in html
    assert order_count(servers) == 1


def test_markup_in_every_text_field_is_shown_escaped_on_the_confirmation(client, servers):
    script = '<script>alert("x")</script>'
    response = submit(client, open_form(client), name=script, address=script)
    # markup is a valid name: it is shown, never run
    assert response.status_code == 303
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert script not in page
    assert page.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") == 2
