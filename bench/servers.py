"""Real PostgreSQL, Redis and gunicorn for one benchmark run, all on 127.0.0.1, and
the settings and counters every benchmark shares."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis

from dev.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from webapp.cli import seed
from webapp.db import make_engine, upgrade

from . import lean

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def app_environment(database_url: str, redis_url: str) -> dict[str, str]:
    """The production settings the benchmarks run the app (and the lean app) with."""
    return {
        "APP_ENV": "production",
        "SECRET_KEY": secrets.token_hex(32),
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        # A virtual user is one browser session placing hundreds of orders; the
        # per-session cap on live forms is for people, not for this.
        "SUBMIT_ONCE_MAX_FORMS_PER_SESSION": "1000000",
        # Every virtual user is 127.0.0.1: a limit that never trips, so its count
        # is still taken in each form's one Redis command, as in production.
        "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE": "1000000000",
        # A virtual user places the same order again and again, which the shop would
        # ask about ("you placed this same order minutes ago"): not asked here, so
        # the shop's figures leave out that check's one indexed read a submit.
        "SAME_ORDER_WINDOW_SECONDS": "0",
    }


def parse_with_presets(
    parser: argparse.ArgumentParser, argv: list[str], presets: dict[str, dict[str, object]]
) -> argparse.Namespace:
    """``argv`` parsed; each preset flag given (``--quick``, ``--smoke``) sets its values
    where the command line did not set them. A SIGTERM then unwinds the benchmark, so
    gunicorn, PostgreSQL and Redis are stopped too."""
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    given = {a.split("=")[0].removeprefix("--") for a in argv}
    for flag, values in presets.items():
        for key, value in values.items() if getattr(args, flag) else ():
            if key not in given:
                setattr(args, key, value)
    return args


def redis_calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command so far, leaving out the benchmark's own INFO, MEMORY and SCAN."""
    return {
        name.removeprefix("cmdstat_"): stats["calls"]
        for name, stats in client.info("commandstats").items()
        if name not in ("cmdstat_info", "cmdstat_memory", "cmdstat_scan")
    }


def wait_until(
    ready: Callable[[], object], what: str, timeout: float = 300, poll: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(poll)


def worker_cpu_seconds(master: int) -> float:
    """CPU time (user + system) used so far by the gunicorn workers under ``master``."""
    tick = os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    total = 0
    for pid in children:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime, stime
        total += int(fields[11]) + int(fields[12])
    return total / tick


@contextmanager
def databases(base: Path, *, fast: bool = True):
    """PostgreSQL (fast: fsync off, the benchmark measures the app, not the disk) with
    the schema and the catalogue in database ``bench``, and Redis."""
    with ExitStack() as stack:
        postgres = EmbeddedPostgres(base / "postgres", fast=fast, throwaway=True).start()
        stack.callback(postgres.remove)
        postgres.create_database("bench")
        engine = make_engine(postgres.url("bench"))
        upgrade(engine)
        seed(engine)
        engine.dispose()
        lean.create_tables(postgres.url("bench"))
        store = EmbeddedRedis(base / "redis", persist=False).start()
        stack.callback(store.stop)
        yield postgres, store


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
            return True
    except OSError:
        return False


@contextmanager
def gunicorn(
    base: Path,
    database_url: str,
    redis_url: str,
    *,
    workers: int,
    threads: int,
    app: str = "bench.app:create_app()",
    env: dict[str, str] | None = None,
    name: str = "gunicorn",
):
    """gunicorn with the production settings (webapp/gunicorn_conf.py, which also empties
    the metrics directory) serving ``app``, with ``env`` added to its environment, its log
    in ``base / (name + ".log")``; yields (port, master pid)."""
    port = free_port()
    env = {
        **os.environ,
        **app_environment(database_url, redis_url),
        "PROMETHEUS_MULTIPROC_DIR": str(base / f"{name}-prometheus"),
        **(env or {}),
    }
    # closed in the finally below
    log = open(base / f"{name}.log", "ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:webapp.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--backlog",
            "512",
            app,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {base / f'{name}.log'}")
            return _answers(port)

        wait_until(ready, "gunicorn to answer", timeout=30, poll=0.1)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(30)
        log.close()
