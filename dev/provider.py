"""A card payment provider for development and tests, on 127.0.0.1: a stand-in for a
third party, with the behaviour the shop must survive.

    python -m dev.provider [--port N] [--store instance/provider.jsonl] [--secret S]
                           [--webhook-url URL --webhook-secret S]
    (scripts/provider serve ... starts it too)

Without ``--port`` (or ``PROVIDER_PORT``) it listens on a free port; either way it prints
the one it listens on.

Every call needs ``Authorization: Bearer <secret>``. Bodies are JSON.

    POST /v1/payment_methods {"card": {"number": "4242424242424242"}}
         -> 201 {"id": "pm_...", "card": {"last4", "brand"}}; a number failing the
            Luhn check -> 400 invalid_number. The shop keeps the token, never the number.
    GET  /v1/payment_methods/<id>                      -> 200, or 404
    POST /v1/charges {"amount", "currency", "payment_method", "reference"}
         + Idempotency-Key: the same key and body -> the same answer again (with
         Idempotent-Replayed: true), the same key with another body -> 422; keys are
         kept KEY_SECONDS (24 h). 201 a charge; 402 card_declined (stored too: a repeat
         is declined again); 503 processing_error once per key for the "retry" card.
    GET  /v1/charges?reference=&status=&limit=&starting_after=   reconciliation
    GET|PUT|DELETE /admin/faults  {"slow": seconds, "drop_after_charge": n,
         "fail_before_charge": n, "fail_after_charge": n}: n next charge requests
         (-1: every one until cleared); slow: every charge answers that much later
    POST /admin/clock {"advance": seconds}   (the key retention, in tests)
    GET  /admin/stats  charge requests received, per key and in all

The test cards are :data:`dev.provider_store.CARDS`. State is one journal file shared by
every provider process on it (:mod:`dev.provider_store`). With ``--webhook-url`` a new
successful charge is also announced as a signed ``payment.succeeded`` event (with its
``charge`` id), from another thread, as providers do, racing the charge's own answer.
"""

from __future__ import annotations

import argparse
import hmac
import importlib.util
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .provider_store import CARDS, FAULTS, Journal, fingerprint, luhn_ok, new_id

ROOT = Path(__file__).resolve().parent.parent
DEV_SECRET = "dev-provider-secret"
Answer = tuple[int, dict[str, Any], dict[str, str]]


def _error(status: int, kind: str, code: str, message: str, **more: Any) -> Answer:
    return status, {"error": {"type": kind, "code": code, "message": message, **more}}, {}


class Provider:
    """What the endpoints do, over a journal."""

    def __init__(self, journal: Journal, webhook: tuple[str, str] | None = None) -> None:
        self.journal, self.webhook = journal, webhook

    def create_payment_method(self, body: dict[str, Any]) -> Answer:
        number = "".join(str((body.get("card") or {}).get("number", "")).split())
        if not number.isdigit() or not luhn_ok(number):
            return _error(400, "card_error", "invalid_number", "The card number is not valid.")
        pm = {
            "id": new_id("pm"),
            "object": "payment_method",
            "card": {"last4": number[-4:], "brand": "visa" if number[0] == "4" else "card"},
            "behaviour": CARDS.get(number, "succeeds"),
        }
        with self.journal.locked() as (_, append):
            append({"t": "pm", "pm": pm})
        return 201, _public(pm), {}

    def payment_method(self, pm_id: str) -> Answer:
        pm = self.journal.read().payment_methods.get(pm_id)
        if pm is None:
            return _error(404, "invalid_request_error", "resource_missing", "No such method.")
        return 200, _public(pm), {}

    def charge(self, body: dict[str, Any], key: str | None) -> Answer | None:
        """The charge's answer; None: drop the connection without one."""
        slow = self.journal.read().faults.get("slow", 0)
        if slow:
            time.sleep(slow)
        with self.journal.locked() as (state, append):
            append({"t": "req", "key": key})
            if self._take_fault(state, append, "fail_before_charge"):
                return _error(500, "api_error", "internal", "Something went wrong; retry.")
            stored = state.answer_for(key) if key else None
            if stored is not None:
                if stored["fingerprint"] != fingerprint(body):
                    return _error(
                        422,
                        "idempotency_error",
                        "key_reused",
                        "Keys for idempotent requests can only be used with the "
                        "same parameters they were first used with.",
                    )
                answer = stored["status"], stored["body"], {"Idempotent-Replayed": "true"}
            else:
                answer = self._new_charge(state, append, body, key)
                if answer[0] in (201, 402) and key:
                    append(
                        {
                            "t": "key",
                            "key": key,
                            "answer": {
                                "fingerprint": fingerprint(body),
                                "status": answer[0],
                                "body": answer[1],
                                "at": state.now(),
                            },
                        }
                    )
                if answer[0] == 201 and self.webhook:
                    threading.Thread(target=self._announce, args=(answer[1],), daemon=True).start()
            # charged (now or before): the answer may be lost
            if answer[0] in (201, 402):
                if self._take_fault(state, append, "drop_after_charge"):
                    return None
                if self._take_fault(state, append, "fail_after_charge"):
                    return _error(500, "api_error", "internal", "Something went wrong; retry.")
            return answer

    def _new_charge(self, state: Any, append: Any, body: dict[str, Any], key: str | None) -> Answer:
        amount, currency = body.get("amount"), body.get("currency")
        if (
            not isinstance(amount, int)
            or isinstance(amount, bool)
            or amount <= 0
            or not isinstance(currency, str)
            or len(currency) != 3
        ):
            return _error(
                400,
                "invalid_request_error",
                "parameter_invalid",
                "amount must be a positive whole number, currency an ISO code.",
            )
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return _error(
                400, "invalid_request_error", "parameter_invalid", "metadata must map to strings."
            )
        pm = state.payment_methods.get(body.get("payment_method"))
        if pm is None:
            return _error(
                400, "invalid_request_error", "resource_missing", "No such payment method."
            )
        if pm["behaviour"] == "retry" and key and not state.attempts.get(key):
            append({"t": "attempt", "key": key})
            return _error(
                503,
                "api_error",
                "processing_error",
                "An error occurred while processing the card; retry.",
            )
        declined = pm["behaviour"] in ("declined", "insufficient_funds")
        charge = {
            "id": new_id("ch"),
            "object": "charge",
            "amount": amount,
            "currency": currency.upper(),
            "payment_method": pm["id"],
            "reference": str(body.get("reference") or ""),
            "created": state.now(),
            "status": "failed" if declined else "succeeded",
            "idempotency_key": key,
            "metadata": metadata,
        }
        append({"t": "charge", "charge": charge})
        if declined:
            reason = "generic_decline" if pm["behaviour"] == "declined" else pm["behaviour"]
            return _error(
                402,
                "card_error",
                "card_declined",
                "Your card was declined.",
                decline_code=reason,
                charge=charge["id"],
            )
        return 201, charge, {}

    def _take_fault(self, state: Any, append: Any, name: str) -> bool:
        left = state.faults.get(name, 0)
        if not left:
            return False
        if left > 0:
            append({"t": "faults", "faults": {**state.faults, name: left - 1}})
        return True

    def charges(self, query: dict[str, str]) -> Answer:
        found = sorted(self.journal.read().charges.values(), key=lambda c: c["created"])
        for name in ("reference", "status"):
            if query.get(name):
                found = [c for c in found if c[name] == query[name]]
        if after := query.get("starting_after"):
            ids = [c["id"] for c in found]
            found = found[ids.index(after) + 1 :] if after in ids else []
        limit = max(1, min(int(query.get("limit") or 100), 1000))
        return 200, {"data": found[:limit], "has_more": len(found) > limit}, {}

    def set_faults(self, body: dict[str, Any] | None) -> Answer:
        faults = {
            name: float(body[name]) if name == "slow" else int(body[name])
            for name in FAULTS
            if body and body.get(name)
        }
        with self.journal.locked() as (_, append):
            append({"t": "faults", "faults": faults})
        return 200, faults, {}

    def advance_clock(self, body: dict[str, Any]) -> Answer:
        with self.journal.locked() as (state, append):
            append({"t": "clock", "offset": state.clock_offset + float(body["advance"])})
            return 200, {"offset": state.clock_offset}, {}

    def stats(self) -> Answer:
        state = self.journal.read()
        return (
            200,
            {
                "charge_requests": state.requests,
                "per_key": state.requests_per_key,
                "charges": len(state.charges),
                "payment_methods": len(state.payment_methods),
            },
            {},
        )

    def _announce(self, charge: dict[str, Any]) -> None:
        assert self.webhook is not None
        url, secret = self.webhook
        event = {
            "id": f"evt_{charge['id']}",
            "type": "payment.succeeded",
            "order_id": charge["reference"],
            "amount_cents": charge["amount"],
            "currency": charge["currency"],
            "charge": charge["id"],
            "metadata": charge.get("metadata") or {},
        }
        body = json.dumps(event).encode()
        # at least once: a provider retries what was not a 2xx
        for attempt in range(5):
            request = urllib.request.Request(
                url,
                data=body,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    _signatures().HEADER: _signatures().sign(secret, body),
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=10):
                    return
            except OSError:
                time.sleep(0.5 * (attempt + 1))


def _public(pm: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pm.items() if k != "behaviour"}


def _signatures() -> Any:
    """The shop's webhook signature format, loaded by path: the provider is no part of
    the app and imports nothing of it."""
    spec = importlib.util.spec_from_file_location(
        "webhook_signatures", ROOT / "webapp/webhooks/signatures.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def handler_for(provider: Provider, secret: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # keep-alive, as a real API's clients use it
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_PUT(self) -> None:
            self._route("PUT")

        def do_DELETE(self) -> None:
            self._route("DELETE")

        def _route(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if url.path == "/healthz":
                return self._send((200, {"ok": True}, {}))
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {secret}".encode()):
                return self._send(
                    _error(401, "authentication_error", "bad_key", "Invalid API key.")
                )
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                return self._send(_error(400, "invalid_request_error", "bad_json", "Bad JSON."))
            query = dict(urllib.parse.parse_qsl(url.query))
            path = url.path.rstrip("/")
            match method, path.split("/")[1:]:
                case "POST", ["v1", "payment_methods"]:
                    answer = provider.create_payment_method(body)
                case "GET", ["v1", "payment_methods", pm_id]:
                    answer = provider.payment_method(pm_id)
                case "POST", ["v1", "charges"]:
                    answer = provider.charge(body, self.headers.get("Idempotency-Key"))
                    # the fault: charged, and no answer at all
                    if answer is None:
                        self.close_connection = True
                        return
                case "GET", ["v1", "charges"]:
                    answer = provider.charges(query)
                case "GET", ["admin", "faults"]:
                    answer = (200, provider.journal.read().faults, {})
                case (("PUT" | "POST"), ["admin", "faults"]):
                    answer = provider.set_faults(body)
                case "DELETE", ["admin", "faults"]:
                    answer = provider.set_faults(None)
                case "POST", ["admin", "clock"]:
                    answer = provider.advance_clock(body)
                case "GET", ["admin", "stats"]:
                    answer = provider.stats()
                case _:
                    answer = _error(404, "invalid_request_error", "not_found", "No such URL.")
            self._send(answer)

        def _send(self, answer: Answer) -> None:
            status, body, headers = answer
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            # the client gave up waiting (a timeout): what a real provider sees too
            return
        super().handle_error(request, client_address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PROVIDER_PORT") or 0),
        help="the port on 127.0.0.1 (default: a free one, printed)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=ROOT / "instance/provider.jsonl",
        help="the journal file (state survives restarts, is shared)",
    )
    parser.add_argument("--secret", default=os.environ.get("PAYMENT_PROVIDER_SECRET", DEV_SECRET))
    parser.add_argument("--webhook-url", help="announce charges to the shop's webhook")
    parser.add_argument("--webhook-secret", default=os.environ.get("PAYMENT_WEBHOOK_SECRET"))
    args = parser.parse_args(argv)
    webhook = (args.webhook_url, args.webhook_secret) if args.webhook_url else None
    if webhook and not args.webhook_secret:
        parser.error("--webhook-url needs --webhook-secret (or PAYMENT_WEBHOOK_SECRET)")
    provider = Provider(Journal(args.store), webhook)
    server = Server(("127.0.0.1", args.port), handler_for(provider, args.secret))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(
        f" * Payment provider on http://127.0.0.1:{server.server_port} (state in {args.store})",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
