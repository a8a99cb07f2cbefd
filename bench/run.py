"""Benchmark the token layer against a baseline that does the same work without it.

    scripts/bench                                  # defaults below; about two minutes
    scripts/bench --workers 2 --threads 4 --concurrency 1,4,8,16 --seconds 6

Starts real PostgreSQL and Redis, serves bench.app with gunicorn, drives it from
separate processes (bench/load.py) on 127.0.0.1, and prints one table with every
figure from this one run. Writes bench/results/latest.md, orders_per_s.png and
latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from . import claims, report
from .load import Browser
from .servers import ROOT, databases, gunicorn, worker_cpu_seconds

RESULTS = ROOT / "bench" / "results"
VARIANTS = ("tokens", "baseline")


def drive(port: int, *args: str, timeout: float = 300) -> dict:
    """Run the load driver in its own process; its JSON result."""
    out = subprocess.run([sys.executable, "-m", "bench.load", *args, "--port", str(port)],
                         cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(out.stdout)


def redis_commands(client: redis.Redis) -> dict[str, int]:
    """Calls per command so far, leaving out the benchmark's own INFO and MEMORY."""
    return {name.removeprefix("cmdstat_"): stats["calls"]
            for name, stats in client.info("commandstats").items()
            if name not in ("cmdstat_info", "cmdstat_memory", "cmdstat_scan")}


def sweep(port: int, master: int, client: redis.Redis, levels: list[int], seconds: float,
          rounds: int) -> list[dict]:
    """Each concurrency level, both variants in turn (ABBA…), ``rounds`` short runs each,
    so that a noisy neighbour on the machine slows both alike; the runs are summed."""
    runs = []
    for level in levels:
        total = {v: {"variant": v, "concurrency": level, "orders": 0, "failures": 0,
                     "seconds": 0.0, "latencies": [], "redis": {}, "app_cpu": 0.0}
                 for v in VARIANTS}
        for r in range(rounds):
            for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                before, cpu = redis_commands(client), worker_cpu_seconds(master)
                run = drive(port, "cycles", "--variant", variant, "--concurrency", str(level),
                            "--seconds", str(seconds / rounds))
                after = redis_commands(client)
                into = total[variant]
                into["app_cpu"] += worker_cpu_seconds(master) - cpu
                for key in ("orders", "failures", "seconds", "latencies"):
                    into[key] += run[key]
                for name, calls in after.items():
                    if calls != before.get(name, 0):
                        into["redis"][name] = into["redis"].get(name, 0) + calls - before.get(
                            name, 0)
        for run in total.values():
            print(f"  {run['variant']:8} c={level:<3} {run['orders'] / run['seconds']:7.1f} "
                  f"orders/s ({run['failures']} failed)", flush=True)
            runs.append(run)
    return runs


def bytes_per_token(port: int, client: redis.Redis, forms: int = 300) -> dict:
    """Render ``forms`` forms, then MEMORY USAGE over every live token key."""
    client.flushall()
    browser = Browser(port)
    for _ in range(forms):
        browser.open_form("tokens")
    keys = list(client.scan_iter(match="ft:*", count=1000))
    sizes = [client.memory_usage(key, samples=0) for key in keys]
    sample_key = keys[0] if keys else ""
    return {"tokens": len(keys), "memory_usage_avg": sum(sizes) / max(len(sizes), 1),
            "key_length": len(sample_key), "ttl": client.ttl(sample_key)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--concurrency", default="1,4,8,16",
                        help="virtual users, comma-separated (default 1,4,8,16)")
    parser.add_argument("--seconds", type=float, default=8, help="per variant and level")
    parser.add_argument("--rounds", type=int, default=4,
                        help="split each variant's seconds into this many alternating runs")
    parser.add_argument("--storm", type=int, default=200, help="concurrent POSTs of one token")
    parser.add_argument("--claims", type=int, default=5000, help="claims per pattern")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.concurrency.split(",")]

    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, \
            databases(Path(tmp)) as (postgres, store):
        client = redis.Redis.from_url(store.url, decode_responses=True)
        with gunicorn(Path(tmp), postgres.url("bench"), store.url,
                      workers=args.workers, threads=args.threads) as (port, master):
            print(f"gunicorn -w {args.workers} --threads {args.threads} on 127.0.0.1:{port}")
            for variant in ("tokens", "baseline"):  # warm-up: imports, pools, caches
                drive(port, "cycles", "--variant", variant, "--concurrency", str(max(levels)),
                      "--seconds", "2")
            runs = sweep(port, master, client, levels, args.seconds, args.rounds)
            memory = bytes_per_token(port, client)
            client.flushall()
            with postgres_orders(postgres) as count:
                before = count()
                storm = drive(port, "storm", "--posts", str(args.storm))
                storm["orders_created"] = count() - before
        claim_rows = claims.measure(store.url, args.claims)
        client.close()

    results = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": report.machine(), "python": platform.python_version(),
               "command": " ".join(["scripts/bench", *argv]), "workers": args.workers,
               "threads": args.threads, "seconds": args.seconds, "rounds": args.rounds,
               "load": (load_at_start, os.getloadavg()[0]), "runs": runs,
               "memory": memory, "storm": storm, "claims": claim_rows}
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = report.markdown(results)
    (args.out / "latest.md").write_text(markdown)
    (args.out / "latest.json").write_text(json.dumps(
        {**results, "runs": [{k: v for k, v in run.items() if k != "latencies"} | {
            "p": report.percentiles(run["latencies"])} for run in runs]}, indent=1))
    report.plot(runs, args.out / "orders_per_s.png")
    print()
    print(markdown)
    return 0


class postgres_orders:
    """``count()`` of orders, on its own short-lived engine."""

    def __init__(self, postgres) -> None:
        from webapp.db import make_engine
        self.engine = make_engine(postgres.url("bench"))

    def __enter__(self):
        from sqlalchemy import text

        def count() -> int:
            with self.engine.connect() as conn:
                return conn.scalar(text("SELECT count(*) FROM orders"))
        return count

    def __exit__(self, *exc: object) -> None:
        self.engine.dispose()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
