"""The lean app's variants (bench/lean.py: lean, lean + 2 bare Redis commands, lean +
library) on each store a user runs, in one run: PostgreSQL straight, PostgreSQL through
Debian's PgBouncer pooling by transaction, and SQLite (a file, WAL).

    scripts/bench --stores            # 3 repetitions, 8 users, 6 s a variant: ~3 minutes
    scripts/bench --stores --quick    # the same figures from short runs, ~1 minute

One gunicorn a store (the lean app alone, the production settings), all three up for the
whole run; each repetition drives every store's variants in turn (the order rotating), so
that a noisy neighbour slows all alike. Each figure is min / median / max over the
repetitions: orders/s of full cycles (form, POST, 303, the entry's page) and the gunicorn
workers' CPU per order; then the targets, lean + library against lean + 2 bare Redis
commands: ≥ 0.95 of its orders/s, ≤ 5 % more CPU per order.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from flask import Flask

from . import lean
from .run import drive
from .servers import databases, gunicorn, parse_with_presets, worker_cpu_seconds

VARIANTS = ("lean", "lean_floor", "lean_once")
STORES = ("postgres", "pgbouncer", "sqlite")
LABELS = {
    "postgres": "PostgreSQL 16",
    "pgbouncer": "PostgreSQL 16 through PgBouncer (transaction)",
    "sqlite": "SQLite (file, WAL)",
}
QUICK = {"seconds": 2.0, "repetitions": 3}
SMOKE = {"seconds": 0.5, "repetitions": 1, "concurrency": 2, "workers": 1, "threads": 2}


def create_app() -> Flask:
    """What each store's gunicorn serves: the lean variants alone, and /readyz."""
    app = Flask(__name__)

    @app.get("/readyz")
    def ready() -> str:
        return "ok"

    lean.mount(app)
    return app


def sqlite_file(folder: Path) -> str:
    """A SQLite database in WAL mode (which the file keeps) with the lean tables."""
    path = folder / "lean.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    url = f"sqlite:///{path}"
    lean.create_tables(url)
    return url


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[dict]]]:
    """Every store's variants, ``args.repetitions`` times: per store and variant, a list
    of {orders, failures, seconds, cpu} a repetition."""
    # the shop's tests' (Debian's PgBouncer as an unprivileged user, on a free port)
    from tests.support.pgbouncer import PgBouncer

    runs: dict[str, dict[str, list[dict]]] = {s: {v: [] for v in VARIANTS} for s in STORES}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-stores-")))
        postgres, store = stack.enter_context(databases(tmp))
        pooler = stack.enter_context(PgBouncer(postgres, pool_size=10))
        urls = {
            "postgres": (postgres.url("bench"), {}),
            "pgbouncer": (pooler.url("bench"), {"DATABASE_POOLER": "transaction"}),
            "sqlite": (sqlite_file(tmp), {}),
        }
        served = {}
        for name, (url, env) in urls.items():
            served[name] = stack.enter_context(
                gunicorn(
                    tmp,
                    postgres.url("bench"),
                    store.url,
                    workers=args.workers,
                    threads=args.threads,
                    app="bench.stores:create_app()",
                    env={"LEAN_DATABASE_URL": url, **env},
                    name=name,
                )
            )
        print(
            f"gunicorn -w {args.workers} --threads {args.threads} a store, "
            f"{args.concurrency} users, {args.seconds} s a variant",
            flush=True,
        )
        # warm-up: imports, pools, caches
        for port, _ in served.values():
            for variant in () if args.smoke else VARIANTS:
                cycles(port, variant, args.concurrency, min(1.0, args.seconds))
        order = [(s, v) for s in STORES for v in VARIANTS]
        for repetition in range(args.repetitions):
            shift = repetition % len(order)
            for name, variant in order[shift:] + order[:shift]:
                port, master = served[name]
                cpu = worker_cpu_seconds(master)
                run = cycles(port, variant, args.concurrency, args.seconds)
                run["cpu"] = worker_cpu_seconds(master) - cpu
                runs[name][variant].append(run)
            print(f"repetition {repetition + 1} of {args.repetitions} done", flush=True)
    return runs


def cycles(port: int, variant: str, concurrency: int, seconds: float) -> dict:
    run = drive(
        port,
        "cycles",
        "--variant",
        variant,
        "--concurrency",
        str(concurrency),
        "--seconds",
        str(seconds),
    )
    return {key: run[key] for key in ("orders", "failures", "seconds")}


def spread(values: list[float], digits: int = 1) -> str:
    """min / **median** / max."""
    if not values:
        return "n/a"
    return (
        f"{min(values):.{digits}f} / **{statistics.median(values):.{digits}f}** / "
        f"{max(values):.{digits}f}"
    )


def report(runs: dict[str, dict[str, list[dict]]]) -> str:
    """The table of every store and variant, then the targets per store."""
    lines = [
        "| store | variant | orders/s | app CPU ms/order | failed |",
        "|---|---|---|---|---|",
    ]
    targets = [
        "| store | lean + library / lean + 2 Redis commands, orders/s (≥ 0.95) "
        "| more CPU per order (≤ 5 %) | held |",
        "|---|---|---|---|",
    ]
    for name in STORES:
        rate, cpu = {}, {}
        for variant in VARIANTS:
            done = runs[name][variant]
            rate[variant] = [r["orders"] / r["seconds"] for r in done]
            cpu[variant] = [1000 * r["cpu"] / r["orders"] for r in done if r["orders"]]
            failed = sum(r["failures"] for r in done)
            lines.append(
                f"| {LABELS[name]} | {variant} | {spread(rate[variant])} "
                f"| {spread(cpu[variant], 2)} | {failed} |"
            )
        # a repetition's pair, measured minutes apart at most
        ratios = [
            once / floor
            for once, floor in zip(rate["lean_once"], rate["lean_floor"], strict=True)
            if floor
        ]
        extra = [
            100 * (once / floor - 1)
            for once, floor in zip(cpu["lean_once"], cpu["lean_floor"], strict=True)
            if floor
        ]
        held = bool(ratios and extra) and (
            statistics.median(ratios) >= 0.95 and statistics.median(extra) <= 5
        )
        targets.append(
            f"| {LABELS[name]} | {spread(ratios, 3)} | {spread(extra, 1)} % "
            f"| {'yes' if held else 'no'} (medians) |"
        )
    return "\n".join([*lines, "", *targets])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"short runs: {QUICK}")
    parser.add_argument("--smoke", action="store_true", help=f"every step once: {SMOKE}")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--concurrency", type=int, default=8, help="virtual users (default 8)")
    parser.add_argument("--seconds", type=float, default=6, help="a variant a repetition")
    parser.add_argument("--repetitions", type=int, default=3, help="figures: min/median/max")
    args = parse_with_presets(parser, argv, {"quick": QUICK, "smoke": SMOKE})
    if shutil.which("pgbouncer") is None and not os.access("/usr/sbin/pgbouncer", os.X_OK):
        print("no PgBouncer: run 'apt-get install pgbouncer' as root", file=sys.stderr)
        return 2
    started, load = time.monotonic(), os.getloadavg()[0]
    runs = measure(args)
    print()
    print(report(runs))
    print(
        f"\nscripts/bench --stores {' '.join(argv)}: took {time.monotonic() - started:.0f} s, "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
