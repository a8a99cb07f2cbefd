"""Profile the full cycle in one process with pyinstrument.

    scripts/bench --profile [--cycles 300] [--variant tokens|baseline]

Runs the app in-process (Flask test client, no gunicorn, so the profile shows
only the app) on real PostgreSQL and Redis and writes the call tree to
bench/results/profile-<variant>.txt.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import sys
import tempfile
import time
from pathlib import Path

import redis
from pyinstrument import Profiler
from sqlalchemy import event

from .app import create_app
from .load import FIELDS, PATHS
from .run import RESULTS
from .servers import databases

_HIDDEN = re.compile(r'name="(csrf_token|form_token)"[^>]*value="([^"]*)"')


def cycle(client, variant: str) -> None:
    new, create = PATHS[variant]
    page = client.get(new).get_data(as_text=True)
    response = client.post(create, data={**FIELDS, **dict(_HIDDEN.findall(page))})
    assert response.status_code == 303, response.status_code
    assert client.get(response.location).status_code == 200


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--variant", choices=sorted(PATHS), default="tokens")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, \
            databases(Path(tmp)) as (postgres, store):
        os.environ.update(APP_ENV="production", SECRET_KEY=secrets.token_hex(32),
                          DATABASE_URL=postgres.url("bench"), REDIS_URL=store.url,
                          FORM_TOKENS_MAX_PER_SESSION="1000000",  # one session, many orders
                          FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE="1000000000")  # one client, too
        app = create_app()
        client = app.test_client()
        statements: list[str] = []
        event.listen(app.extensions["db"].kw["bind"], "before_cursor_execute",
                     lambda conn, cursor, sql, *args: statements.append(sql))
        server = redis.Redis.from_url(store.url)
        # The JSON request log is written (it is part of the work) but not shown.
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            for _ in range(20):  # warm-up: imports, pools, template cache
                cycle(client, args.variant)
            statements.clear()
            redis_before = _calls(server)
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(args.cycles):
                cycle(client, args.variant)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            per_cycle = {"sql": len(statements) / args.cycles,
                         "redis": (_calls(server) - redis_before) / args.cycles,
                         "cpu_ms": cpu / args.cycles * 1000, "wall_ms": wall / args.cycles * 1000}
            profiler = Profiler(interval=0.0005)
            with profiler:
                for _ in range(args.cycles):
                    cycle(client, args.variant)
        server.close()
    summary = (f"{args.cycles} cycles of {args.variant} "
               f"(CATALOGUE_CACHE_SECONDS={app.config['CATALOGUE_CACHE_SECONDS']:g}), per cycle: "
               f"{per_cycle['sql']:.2f} SQL statements through SQLAlchemy (not counted: pool "
               f"pre-pings, and the BEGIN psycopg sends itself; scripts/bench --costs "
               f"counts round trips), "
               f"{per_cycle['redis']:.2f} Redis commands, {per_cycle['cpu_ms']:.1f} ms CPU, "
               f"{per_cycle['wall_ms']:.1f} ms wall (unprofiled)")
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"profile-{args.variant}.txt"
    path.write_text(f"{summary}\n\n{text}")
    print(text)
    print(summary)
    print(f"written to {path}")
    return 0


def _calls(server: redis.Redis) -> int:
    stats = server.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
