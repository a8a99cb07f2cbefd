"""Benchmark the token layer against a baseline that does the same work without it,
against the floor of any Redis-backed token (the baseline plus one bare SET and one
bare GETDEL, bench/app.py), and against the strongest alternative without Redis
(a signed nonce, bench/nonce.py).

    scripts/bench                 # defaults below: 3 repetitions of the sweep, ~10 minutes
    scripts/bench --quick         # the same figures from short runs, ~1.5 minutes
    scripts/bench --workers 2 --threads 4 --concurrency 1,4,8,16 --seconds 10 --repetitions 3

Starts real PostgreSQL and Redis, serves bench.app with gunicorn, drives it from
separate processes (bench/load.py) on 127.0.0.1. The sweep (every level, every
variant, in alternating short runs) is repeated; each figure is given as
min / median / max over the repetitions (the median decides). Writes
bench/results/latest.md, latest.json and orders_per_s.png; see bench/results/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis
from sqlalchemy import text

from webapp.db import make_engine
from webapp.redis_urls import make_client

from . import claims, report
from .costs import cycle, in_process_app, open_form, post
from .load import Browser
from .servers import (
    RESULTS,
    ROOT,
    databases,
    gunicorn,
    parse_with_presets,
    redis_calls,
    worker_cpu_seconds,
)
from .wire import Relay

VARIANTS = report.VARIANTS
#: --quick: every figure, from short runs (about two minutes).
QUICK = {"concurrency": "1,8", "seconds": 2.0, "rounds": 2, "storm": 100, "claims": 1000}
#: --smoke: every step once, in seconds, figures meaningless (tests/deploy/test_bench.py);
#: no plot.
SMOKE = {
    "workers": 1,
    "threads": 2,
    "concurrency": "2",
    "seconds": 0.5,
    "rounds": 1,
    "repetitions": 1,
    "storm": 8,
    "claims": 50,
    "orders": 3,
}


def drive(port: int, *args: str, timeout: float = 300) -> dict:
    """Run the load driver in its own process; its JSON result."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.load", *args, "--port", str(port)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"bench.load {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def sweep(
    port: int,
    master: int,
    client: redis.Redis,
    levels: list[int],
    seconds: float,
    rounds: int,
    repetition: int,
) -> list[dict]:
    """Each concurrency level, the variants in turn (rotating the order each round),
    ``rounds`` short runs each, so that a noisy neighbour on the machine slows all
    alike; the runs of a variant at a level are summed."""
    runs = []
    for level in levels:
        total = {
            v: {
                "variant": v,
                "concurrency": level,
                "repetition": repetition,
                "orders": 0,
                "failures": 0,
                "seconds": 0.0,
                "latencies": [],
                "form_latencies": [],
                "redis": {},
                "app_cpu": 0.0,
            }
            for v in VARIANTS
        }
        for r in range(rounds):
            shift = (r + repetition) % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                before, cpu = redis_calls(client), worker_cpu_seconds(master)
                run = drive(
                    port,
                    "cycles",
                    "--variant",
                    variant,
                    "--concurrency",
                    str(level),
                    "--seconds",
                    str(seconds / rounds),
                )
                after = redis_calls(client)
                into = total[variant]
                into["app_cpu"] += worker_cpu_seconds(master) - cpu
                for key in ("orders", "failures", "seconds", "latencies", "form_latencies"):
                    into[key] += run[key]
                for name, calls in after.items():
                    if calls != before.get(name, 0):
                        into["redis"][name] = (
                            into["redis"].get(name, 0) + calls - before.get(name, 0)
                        )
        print(
            "  "
            + "   ".join(
                f"{v} {t['orders'] / t['seconds']:6.1f}/s ({t['failures']} failed)"
                for v, t in total.items()
            )
            + f"   c={level}",
            flush=True,
        )
        runs.extend(total.values())
    return runs


def code_version() -> str:
    """The commit measured, and whether the checkout differed from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + (
        " with uncommitted changes" if dirty else ""
    )


def redis_round_trips(
    port: int, url: str, client: redis.Redis, repetition: int, orders: int = 100
) -> list[dict]:
    """Redis commands per successful order of each variant as MONITOR shows them (untimed,
    one user): those a client sent, one round trip each, apart from those a script ran."""
    rows = []
    for variant in VARIANTS:
        seen: list[dict] = []
        ready = threading.Event()
        end = f"bench:end:{variant}:{repetition}"
        watcher = threading.Thread(target=_monitor, args=(url, end, seen, ready), daemon=True)
        watcher.start()
        ready.wait(10)
        browser = Browser(port)
        done = sum(browser.cycle(variant) for _ in range(orders))
        client.echo(end)
        watcher.join(30)
        if watcher.is_alive():
            raise RuntimeError("MONITOR did not see the end of the orders within 30 s")
        counts: dict[str, dict[str, int]] = {"sent": {}, "scripted": {}}
        for command in seen:
            into = counts["scripted" if command["client_type"] == "lua" else "sent"]
            name = command["command"].split(" ", 1)[0].upper()
            into[name] = into.get(name, 0) + 1
        rows.append({"variant": variant, "repetition": repetition, "orders": done, **counts})
    return rows


def _monitor(url: str, end: str, into: list[dict], ready: threading.Event) -> None:
    """Every command Redis runs into ``into``, from ``ready`` until ``ECHO end``."""
    # A client of its own, without the app's 2 s socket timeout: MONITOR waits for traffic.
    with redis.Redis.from_url(url, decode_responses=True) as own, own.monitor() as monitor:
        ready.set()
        for command in monitor.listen():
            if command["command"] == f"ECHO {end}":
                return
            into.append(command)


def bytes_per_token(port: int, client: redis.Redis, forms: int = 300) -> dict:
    """Render ``forms`` forms, then MEMORY USAGE over every live token key."""
    client.flushall()
    browser = Browser(port)
    for _ in range(forms):
        browser.open_form("tokens")
    keys = list(client.scan_iter(match="so:*", count=1000))
    sizes = [client.memory_usage(key, samples=0) for key in keys]
    sample_key = keys[0] if keys else ""
    return {
        "tokens": len(keys),
        "memory_usage_avg": sum(sizes) / max(len(sizes), 1),
        "key_length": len(sample_key),
        "ttl": client.ttl(sample_key),
    }


def postgres_round_trips(postgres, store, posts: int = 5) -> dict[str, list[int]]:
    """PostgreSQL round trips of each variant's first submit (one POST), counted on the
    wire (bench/wire.py) under the Flask test client, untimed; ``posts`` counts each."""
    counted: dict[str, list[int]] = {}
    with Relay(postgres.port, postgres.password) as relay:
        app = in_process_app(relay.url("bench"), store.url)
        # The JSON request log is written (it is part of the work) but not shown.
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            for variant in VARIANTS:
                client = app.test_client()
                # its pool's first connection, its caches
                cycle(client, variant)
                counted[variant] = []
                for _ in range(posts):
                    form = open_form(client, variant)
                    with relay.count() as trips:
                        post(client, form, variant)
                    counted[variant].append(trips[0])
    return counted


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"short runs: {', '.join(f'--{k} {v}' for k, v in QUICK.items())}",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every step once, no warm-up: " + ", ".join(f"--{k} {v}" for k, v in SMOKE.items()),
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument(
        "--concurrency",
        default="1,4,8,16",
        help="virtual users, comma-separated (default 1,4,8,16)",
    )
    parser.add_argument(
        "--seconds", type=float, default=10, help="per variant, level and repetition (default 10)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="split each variant's seconds into this many alternating runs",
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=3,
        help="repeat the whole sweep; figures are min / median / max over them",
    )
    parser.add_argument("--storm", type=int, default=200, help="concurrent POSTs of one form")
    parser.add_argument("--claims", type=int, default=5000, help="claims per pattern")
    parser.add_argument(
        "--orders",
        type=int,
        default=100,
        help="orders per variant under MONITOR (Redis round trips)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parse_with_presets(parser, argv, {"quick": QUICK, "smoke": SMOKE})
    levels = [int(level) for level in args.concurrency.split(",")]

    started, load_at_start, code = time.monotonic(), os.getloadavg()[0], code_version()
    runs, storms, trips, memory, pg_trips = [], [], [], {}, {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        databases(Path(tmp)) as (postgres, store),
    ):
        client = make_client(store.url)
        engine = make_engine(postgres.url("bench"))

        def count() -> int:
            with engine.connect() as conn:
                return conn.scalar(text("SELECT count(*) FROM orders"))

        with gunicorn(
            Path(tmp), postgres.url("bench"), store.url, workers=args.workers, threads=args.threads
        ) as (port, master):
            print(f"gunicorn -w {args.workers} --threads {args.threads} on 127.0.0.1:{port}")
            # warm-up: imports, pools, caches
            for variant in () if args.smoke else VARIANTS:
                drive(
                    port,
                    "cycles",
                    "--variant",
                    variant,
                    "--concurrency",
                    str(max(levels)),
                    "--seconds",
                    str(min(2.0, args.seconds)),
                )
            for repetition in range(args.repetitions):
                print(f"repetition {repetition + 1} of {args.repetitions}", flush=True)
                runs += sweep(port, master, client, levels, args.seconds, args.rounds, repetition)
                for variant in ("tokens", "nonce"):
                    client.flushall()
                    before = count()
                    storm = drive(port, "storm", "--variant", variant, "--posts", str(args.storm))
                    storms.append(
                        {
                            **storm,
                            "variant": variant,
                            "repetition": repetition,
                            "orders_created": count() - before,
                        }
                    )
                trips += redis_round_trips(port, store.url, client, repetition, args.orders)
            memory = bytes_per_token(port, client, 3 * args.orders)
        pg_trips = postgres_round_trips(postgres, store)
        claim_rows = claims.measure(store.url, args.claims)
        client.close()
        engine.dispose()

    results = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": report.machine(),
        "python": platform.python_version(),
        "command": " ".join(["scripts/bench", *argv]),
        "code": code,
        "workers": args.workers,
        "threads": args.threads,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "repetitions": args.repetitions,
        "levels": levels,
        "load": (load_at_start, os.getloadavg()[0]),
        "runs": runs,
        "memory": memory,
        "storms": storms,
        "round_trips": trips,
        "pg_round_trips": pg_trips,
        "claims": claim_rows,
        "duration_s": round(time.monotonic() - started),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = report.markdown(results)
    (args.out / "latest.md").write_text(markdown)
    (args.out / "latest.json").write_text(json.dumps(report.as_json(results), indent=1))
    if not args.smoke:
        report.plot(runs, args.out / "orders_per_s.png")
    print()
    print(markdown)
    print(f"took {results['duration_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
