"""The load driver, run as its own process so it does not share the app's GIL.

    python -m bench.load cycles --port P --variant tokens --concurrency 8 --seconds 6
    python -m bench.load storm --port P --variant tokens --posts 200

Prints one JSON object. Talks only to 127.0.0.1; every run is bounded in time
and in count. Each virtual user keeps one keep-alive connection and its own
session cookie, like a browser.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse

#: Where the lean app's variants are mounted (bench/lean.py).
LEAN_PREFIXES = {"lean": "/lean", "lean_floor": "/lean-floor", "lean_once": "/lean-once"}
PATHS = {
    "tokens": ("/orders/new", "/orders"),
    "baseline": ("/baseline/orders/new", "/baseline/orders"),
    "nonce": ("/nonce/orders/new", "/nonce/orders"),
    "floor": ("/floor/orders/new", "/floor/orders"),
    **{variant: (f"{prefix}/new", f"{prefix}/send") for variant, prefix in LEAN_PREFIXES.items()},
}
FIELDS = {
    "product": "1",
    "quantity": "2",
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "address": "12 St James's Square\nLondon SW1Y 4JH",
}
#: The lean app's form (bench/lean.py) has three of the shop's fields.
LEAN_FIELDS = {name: FIELDS[name] for name in ("name", "email", "quantity")}
_HIDDEN = re.compile(r'name="(csrf_token|form_token)"[^>]*value="([^"]*)"')


def form_fields(page: str, variant: str = "tokens") -> dict[str, str]:
    """What a user sends back from a rendered order form: the fields and its hidden tokens."""
    return {
        **(LEAN_FIELDS if variant.startswith("lean") else FIELDS),
        **dict(_HIDDEN.findall(page)),
    }


class Browser:
    """One user: a keep-alive connection and a session cookie."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        # name -> value, as a browser keeps them
        self.cookies: dict[str, str] = {}
        self.form_seconds = 0.0
        # GET of the form alone, per cycle
        self.form_latencies: list[float] = []

    def send(self, method: str, path: str, form: dict[str, str] | None = None):
        headers = {"Cookie": self.cookie} if self.cookies else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            # the server closed a kept-alive connection: retry once
            self.conn.close()
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        text = response.read().decode()
        for cookie in response.msg.get_all("Set-Cookie") or ():
            name, _, value = cookie.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value
        return response.status, response.getheader("Location"), text

    @property
    def cookie(self) -> str:
        """The Cookie header this browser sends."""
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())

    def open_form(self, variant: str) -> dict[str, str]:
        started = time.perf_counter()
        status, _, page = self.send("GET", PATHS[variant][0])
        self.form_seconds = time.perf_counter() - started
        if status != 200:
            raise RuntimeError(f"form answered {status}")
        return form_fields(page, variant)

    def cycle(self, variant: str) -> bool:
        """GET the form, POST it, follow the 303; True if it ended on an order page."""
        form = self.open_form(variant)
        self.form_latencies.append(self.form_seconds)
        status, location, _ = self.send("POST", PATHS[variant][1], form)
        if status != 303 or not location:
            return False
        return self.send("GET", location)[0] == 200


def cycles(port: int, variant: str, concurrency: int, seconds: float, limit: int) -> dict:
    latencies: list[float] = []
    form_latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def user() -> None:
        browser = Browser(port)
        while time.monotonic() < stop_at:
            with lock:
                if len(latencies) + failures[0] >= limit:
                    return
            started = time.perf_counter()
            ok = browser.cycle(variant)
            elapsed = time.perf_counter() - started
            with lock:
                if ok:
                    latencies.append(elapsed)
                else:
                    failures[0] += 1
        with lock:
            form_latencies.extend(browser.form_latencies)

    started = time.monotonic()
    threads = [threading.Thread(target=user) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "variant": variant,
        "concurrency": concurrency,
        "orders": len(latencies),
        "failures": failures[0],
        "seconds": time.monotonic() - started,
        "latencies": latencies,
        "form_latencies": form_latencies,
    }


def storm(port: int, posts: int, variant: str = "tokens") -> dict:
    """``posts`` concurrent POSTs of one rendered form, each on its own connection."""
    owner = Browser(port)
    form = owner.open_form(variant)
    browsers = [Browser(port) for _ in range(posts)]
    for browser in browsers:
        browser.cookies = dict(owner.cookies)
        browser.conn.connect()
    barrier = threading.Barrier(posts)
    results: list[tuple[float, int, str, bool]] = [(0.0, 0, "", False)] * posts

    def post(i: int) -> None:
        barrier.wait()
        started = time.perf_counter()
        status, location, _ = browsers[i].send("POST", PATHS[variant][1], form)
        elapsed = time.perf_counter() - started
        # A repeat is told "already placed" by a notice flashed into the session, so
        # its answer sets the session cookie; the one that placed the order sets none.
        repeat = browsers[i].cookies != owner.cookies
        results[i] = (elapsed, status, location or "", repeat)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(posts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    landed = [owner.send("GET", location)[0] for _, _, location, _ in results[:1] if location]
    return {"results": results, "first_page_status": landed[0] if landed else None}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["cycles", "storm"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--variant", choices=sorted(PATHS), default="tokens")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--limit", type=int, default=20000, help="at most this many cycles")
    parser.add_argument("--posts", type=int, default=200)
    args = parser.parse_args(argv)
    if args.mode == "cycles":
        result = cycles(args.port, args.variant, args.concurrency, args.seconds, args.limit)
    else:
        result = storm(args.port, args.posts, args.variant)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
