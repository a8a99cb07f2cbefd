"""Where a cycle's CPU goes, in place: each request of the cycle split into the time spent
in SQLAlchemy + psycopg, in redis-py, in Jinja and in everything else (Flask, Flask-WTF,
the token layer's own Python, the shop's), for two variants side by side.

    scripts/bench --in-place [--cycles 600] [--variants tokens,floor]

One process, the Flask test client, real PostgreSQL and Redis. The variants' cycles take
turns (ABBA), so drift hits them alike; each figure is a 10 % trimmed mean of per-cycle CPU
(``time.thread_time``), in µs. The split wraps public methods only (``Session``'s,
``Connection.exec_driver_sql``, ``Redis.execute_command``, ``Template.render``), each
counted without the others it calls (a template that issues a token: its Redis command is
Redis's). Writes bench/results/inplace.md (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import jinja2
import redis
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from .costs import in_process_app, open_form, post
from .servers import RESULTS, databases

PARTS = {
    "SQLAlchemy + psycopg": [
        (Session, name)
        for name in (
            "connection",
            "execute",
            "scalar",
            "scalars",
            "get",
            "flush",
            "commit",
            "rollback",
            "close",
        )
    ]
    + [(Connection, "exec_driver_sql")],
    "redis-py": [(redis.Redis, "execute_command")],
    "Jinja": [(jinja2.Template, "render")],
}
REQUESTS = ("GET form", "POST", "GET order")


class Split:
    """Exclusive CPU per part while installed: a part's time leaves out the parts it calls."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = defaultdict(int)
        # per open part: [children's time]
        self._stack: list[list[int]] = []

    def timed(self, part: str, method):
        def wrapper(*args, **kwargs):
            self._stack.append([0])
            started = time.thread_time_ns()
            try:
                return method(*args, **kwargs)
            finally:
                elapsed = time.thread_time_ns() - started
                children = self._stack.pop()[0]
                self.spent[part] += elapsed - children
                if self._stack:
                    self._stack[-1][0] += elapsed

        return wrapper

    @contextlib.contextmanager
    def installed(self):
        originals = [
            (owner, name, owner.__dict__[name])
            for methods in PARTS.values()
            for owner, name in methods
        ]
        for part, methods in PARTS.items():
            for owner, name in methods:
                setattr(owner, name, self.timed(part, getattr(owner, name)))
        try:
            yield self
        finally:
            for owner, name, method in originals:
                setattr(owner, name, method)


def measure(cycles: int, variants: list[str]) -> dict[str, dict[str, dict[str, list[int]]]]:
    """Per variant, request and part (and "all"): the per-cycle CPU in ns."""
    figures: dict = {v: {r: defaultdict(list) for r in REQUESTS} for v in variants}
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        databases(Path(tmp)) as (postgres, store),
    ):
        app = in_process_app(postgres.url("bench"), store.url)
        client = app.test_client()
        # The JSON request log is written (it is part of the work) but not shown.
        with (
            open(os.devnull, "w") as devnull,
            contextlib.redirect_stderr(devnull),
            Split().installed() as split,
        ):
            # the first 20: imports, pools, caches
            for number in range(cycles + 20):
                for variant in variants if number % 2 else variants[::-1]:
                    for request_name, (total, spent) in zip(
                        REQUESTS, one_cycle(client, variant, split), strict=True
                    ):
                        if number < 20:
                            continue
                        into = figures[variant][request_name]
                        into["all"].append(total)
                        for part in PARTS:
                            into[part].append(spent.get(part, 0))
                        into["everything else"].append(total - sum(spent.values()))
    return figures


def one_cycle(client, variant: str, split: Split) -> list[tuple[int, dict[str, int]]]:
    """GET the form, POST it, GET the order: each request's CPU and its parts."""
    measured, value = [], None
    for request_name in REQUESTS:
        split.spent.clear()
        started = time.thread_time_ns()
        if request_name == "GET form":
            value = open_form(client, variant)
        elif request_name == "POST":
            value = post(client, value, variant)
        else:
            client.get(value)
        measured.append((time.thread_time_ns() - started, dict(split.spent)))
    return measured


def trimmed(values: list[int]) -> float:
    values = sorted(values)
    cut = len(values) // 10
    return statistics.mean(values[cut : len(values) - cut]) / 1000


def table(figures, variants: list[str]) -> str:
    first, second = variants[0], variants[-1]
    parts = [*PARTS, "everything else", "all"]
    lines = [
        f"| request | part | {' | '.join(variants)} | {first} − {second} |",
        "|---|---|" + "---|" * (len(variants) + 1),
    ]
    whole = {v: sum(trimmed(figures[v][r]["all"]) for r in REQUESTS) for v in variants}
    for request_name in REQUESTS:
        for part in parts:
            cells = {v: trimmed(figures[v][request_name][part]) for v in variants}
            lines.append(
                f"| {request_name} | {part} | "
                + " | ".join(f"{cells[v]:.0f}" for v in variants)
                + f" | {cells[first] - cells[second]:+.0f} |"
            )
    for part in parts:
        cells = {v: sum(trimmed(figures[v][r][part]) for r in REQUESTS) for v in variants}
        share = (cells[first] - cells[second]) / whole[second] * 100
        lines.append(
            f"| **cycle** | {part} | "
            + " | ".join(f"{cells[v]:.0f}" for v in variants)
            + f" | **{cells[first] - cells[second]:+.0f}** ({share:+.1f} % of "
            f"{second}'s cycle) |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=600, help="cycles per variant")
    parser.add_argument(
        "--variants",
        default="tokens,floor",
        help="comma-separated, the first compared with the last",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    figures = measure(args.cycles, variants)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = (
        f"CPU µs per request, split in place ({args.cycles} cycles a variant, taking turns, "
        f"10 % trimmed means; {when}, load average {os.getloadavg()[0]:.1f}): "
        f"`scripts/bench --in-place --cycles {args.cycles} --variants {args.variants}`\n\n"
        f"{table(figures, variants)}\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "inplace.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
