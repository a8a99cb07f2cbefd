"""Serve the app on http://127.0.0.1:5000 (or ``BIND``), with embedded servers by default.

    python -m dev.run            (what scripts/run calls)

When DATABASE_URL and REDIS_URL are unset it starts a real PostgreSQL and a
real Redis from Python packages, keeps their data in ./instance/, applies the
migrations, seeds the demo catalogue, serves the app with gunicorn beside the
refund worker (python -m webapp.refunds.worker), and stops them all on exit:
Ctrl-C, SIGTERM, or SIGHUP (the terminal closed). It starts nothing over a port
that is taken (a server left by a run that was killed, another program): it says
who holds it and what to do. As root, when PostgreSQL's service user cannot reach
./instance/ (a checkout inside a 0700 folder: root's home, ``mktemp -d``), the data
lives where that user can (under /var/lib/pgserver/) and ./instance/postgres is a
link to it, so everything a run keeps is still reached from ./instance/; no
folder's mode is changed (see :func:`link_instance`).

Unless PAYMENT_PROVIDER_URL is set it also starts the card provider the checkout
charges (dev/provider.py, its state in ./instance/provider.jsonl, announcing each
charge to the app's webhook), on 127.0.0.1:8765 when that is free and on a free port
when it is not (a test suite's provider, another checkout's run); it prints which.

``DEV_INSTANCE``, ``DEV_PG_PORT``, ``DEV_REDIS_PORT`` and ``DEV_PROVIDER_PORT`` move
the embedded servers (tests run a second copy beside yours); ``DEV_PROVIDER_PORT=0``
is any free port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from .ports import holder, in_use

ROOT = Path(__file__).resolve().parent.parent
PG_PORT, REDIS_PORT = 54329, 63799
#: The card provider's port when it is free: the same URL from run to run, for a human.
PROVIDER_PORT = 8765
#: Where gunicorn listens when BIND names a host and no port.
GUNICORN_PORT = 8000
#: Ctrl-C too: a shell that started this in the background (or a parent that ignores it)
#: passes SIGINT on ignored, and Python then never raises KeyboardInterrupt.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop(signum: int, _frame: object) -> None:
    # unwinds main(), whose finally stops everything
    raise SystemExit(0)


def main() -> int:
    # as Ctrl-C: a process manager, or the terminal closed
    for signum in STOPPING:
        signal.signal(signum, _stop)
    env = dict(os.environ)
    env.setdefault("APP_ENV", "development")
    # The production gunicorn settings (JSON logs, metrics summed over workers), on
    # loopback and smaller.
    bind = env.setdefault("BIND", "127.0.0.1:5000")
    instance = Path(env.get("DEV_INSTANCE") or ROOT / "instance")
    env.setdefault("WEB_CONCURRENCY", "2")
    env.setdefault("WEB_THREADS", "4")
    env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(instance / "metrics"))
    pg_port, redis_port = (
        int(env.get(name) or default)
        for name, default in (("DEV_PG_PORT", PG_PORT), ("DEV_REDIS_PORT", REDIS_PORT))
    )
    provider = provider_port(env)
    if refusal := taken(env, bind, pg_port, redis_port, provider):
        print(refusal, file=sys.stderr)
        return 1
    servers: list[EmbeddedPostgres | EmbeddedRedis] = []
    processes: list[subprocess.Popen] = []
    try:
        if not env.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(instance / "postgres", pg_port)
            servers.append(postgres.start())
            postgres.create_database("webapp")
            env["DATABASE_URL"] = postgres.url("webapp")
            print(f" * PostgreSQL 16 on 127.0.0.1:{pg_port} (data in {postgres.data_dir})")
            if said := link_instance(postgres):
                print(said)
        if not env.get("REDIS_URL"):
            redis = EmbeddedRedis(instance / "redis", redis_port)
            servers.append(redis.start())
            env["REDIS_URL"] = redis.url
            print(f" * Redis 6.2 on 127.0.0.1:{redis_port} (data in {redis.data_dir})")
        if not env.get("PAYMENT_PROVIDER_URL"):
            processes.append(start_provider(env, instance, bind, provider))
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", "webapp", "init-db"], env=env, check=True
        )
        # Sessions of their own: a signal from the terminal reaches this process only,
        # which stops them in order (gunicorn would take SIGHUP as "reload").
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "webapp.refunds.worker"], env=env, start_new_session=True
            )
        )
        gunicorn = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:webapp.gunicorn_conf",
                "webapp:create_app()",
            ],
            env=env,
            start_new_session=True,
        )
        processes.append(gunicorn)
        if serving(bind, gunicorn):
            print(
                f" * Serving on http://{bind}  (Ctrl-C stops the app and the servers)", flush=True
            )
        return gunicorn.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        # a second signal must not cut the clean-up short
        for signum in STOPPING:
            signal.signal(signum, signal.SIG_IGN)
        # SIGTERM: gunicorn finishes its requests, the refund worker what is in flight.
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        for server in reversed(servers):
            server.stop()


def provider_port(env: dict[str, str], preferred: int = PROVIDER_PORT) -> int:
    """The card provider's port: ``DEV_PROVIDER_PORT`` (0: any free one), else
    ``preferred`` when nothing listens there, else any free one: a port that is taken is
    refused only when it was asked for."""
    if given := env.get("DEV_PROVIDER_PORT"):
        return int(given) or free_port()
    return free_port() if in_use("127.0.0.1", preferred) else preferred


def start_provider(env: dict[str, str], instance: Path, bind: str, port: int) -> subprocess.Popen:
    """The dev card provider on ``port``, announcing charges to this run's webhook;
    sets the URL."""
    env["PAYMENT_PROVIDER_URL"] = f"http://127.0.0.1:{port}"
    args = [
        sys.executable,
        "-m",
        "dev.provider",
        "--port",
        str(port),
        "--store",
        str(instance / "provider.jsonl"),
    ]
    if env.get("PAYMENT_WEBHOOK_SECRET") or env.get("APP_ENV") == "development":
        # what the app accepts under run
        from webapp.secret_rules import DEV_WEBHOOK_SECRET

        args += [
            "--webhook-url",
            f"http://{bind}/webhooks/payments",
            "--webhook-secret",
            env.get("PAYMENT_WEBHOOK_SECRET") or DEV_WEBHOOK_SECRET,
        ]
    return subprocess.Popen(args, cwd=ROOT, env=env, start_new_session=True)


def link_instance(postgres: EmbeddedPostgres) -> str | None:
    """Make the folder asked for a link to the data, when the data had to live elsewhere
    (PostgreSQL's user cannot reach the folder, and no folder is opened for it). A folder
    that is there already (an older cluster) is left as it is. Returns what to tell."""
    wanted, real = postgres.requested_dir, postgres.data_dir
    if real == wanted:
        return None
    if wanted.is_symlink() and wanted.resolve() != real.resolve():
        # a link to a cluster of an older layout: this run's is elsewhere
        wanted.unlink()
    if not wanted.exists() and not wanted.is_symlink():
        wanted.parent.mkdir(parents=True, exist_ok=True)
        wanted.symlink_to(real, target_is_directory=True)
    if not wanted.is_symlink():
        return (
            f"   ({postgres.user} cannot reach {wanted.parent}; {wanted} holds an older "
            f"cluster, left as it is; this run's data is in {real})"
        )
    return (
        f"   ({postgres.user} cannot reach {wanted.parent}, so the data lives there, "
        f"and {wanted} links to it; no folder's mode was changed)"
    )


def taken(
    env: dict[str, str], bind: str, pg_port: int, redis_port: int, provider: int
) -> str | None:
    """Why this run must not start (a port it would use is taken), or None."""
    wanted = []
    if not env.get("DATABASE_URL"):
        wanted.append(("PostgreSQL", "127.0.0.1", pg_port, "DATABASE_URL"))
    if not env.get("REDIS_URL"):
        wanted.append(("Redis", "127.0.0.1", redis_port, "REDIS_URL"))
    if not env.get("PAYMENT_PROVIDER_URL"):
        wanted.append(("the card provider", "127.0.0.1", provider, "PAYMENT_PROVIDER_URL"))
    if not bind.startswith(("unix:", "fd://")):
        host, _, port = bind.rpartition(":")
        # gunicorn's own default port for a bare host
        if not port.isdigit():
            host, port = bind, str(GUNICORN_PORT)
        wanted.append(("the app", host.strip("[]"), int(port), "BIND"))
    for what, host, port, setting in wanted:
        if in_use(host, port):
            return (
                f"scripts/run: {host}:{port}, where {what} would listen, is in use by "
                f"{holder(port)}, which this run did not start (a server left by an "
                "earlier run that was killed, or another program). Stop it (kill the "
                f"process) and run again, or set {setting} to use another "
                f"{'address' if setting == 'BIND' else 'server'}."
            )
    return None


def serving(bind: str, gunicorn: subprocess.Popen, timeout: float = 60) -> bool:
    """Wait until gunicorn accepts connections on ``bind``; False if it exited."""
    if bind.startswith(("unix:", "fd://")):
        return gunicorn.poll() is None
    host, _, port = bind.rpartition(":")
    deadline = time.monotonic() + timeout
    while gunicorn.poll() is None and time.monotonic() < deadline:
        if in_use(host.strip("[]"), int(port)):
            return True
        time.sleep(0.1)
    return gunicorn.poll() is None


if __name__ == "__main__":
    sys.exit(main())
