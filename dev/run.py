"""Serve the app on http://127.0.0.1:5000, with embedded servers by default.

    python -m dev.run            (what scripts/run calls)

When DATABASE_URL and REDIS_URL are unset it starts a real PostgreSQL and a
real Redis from Python packages, keeps their data in ./instance/, applies the
migrations, seeds the catalogue, serves the app with gunicorn beside the
refund worker (python -m webapp.refunds.worker), and stops them all on exit
(Ctrl-C). As root, when PostgreSQL's service user cannot reach ./instance/ (a
checkout inside a 0700 folder), its data lives under /var/lib/pgserver/ instead,
and it says where; no folder's mode is changed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from .embedded import EmbeddedPostgres, EmbeddedRedis

INSTANCE = Path(__file__).resolve().parent.parent / "instance"
PG_PORT, REDIS_PORT = 54329, 63799


def main() -> int:
    # SIGTERM (e.g. from a process manager) stops everything as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    env = dict(os.environ)
    env.setdefault("APP_ENV", "development")
    servers: list[EmbeddedPostgres | EmbeddedRedis] = []
    try:
        if not env.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(INSTANCE / "postgres", PG_PORT).start()
            servers.append(postgres)
            postgres.create_database("webapp")
            env["DATABASE_URL"] = postgres.url("webapp")
            print(f" * PostgreSQL 16 on 127.0.0.1:{PG_PORT} (data in {postgres.data_dir})")
            if postgres.data_dir != postgres.requested_dir:
                print(f"   ({postgres.user} cannot reach {INSTANCE}, so the data lives there;"
                      " no folder's mode was changed)")
                if (postgres.requested_dir / "PG_VERSION").exists():
                    print(f"   ({postgres.requested_dir} holds an older cluster, left as it is)")
        if not env.get("REDIS_URL"):
            redis = EmbeddedRedis(INSTANCE / "redis", REDIS_PORT).start()
            servers.append(redis)
            env["REDIS_URL"] = redis.url
            print(f" * Redis 6.2 on 127.0.0.1:{REDIS_PORT} (data in instance/redis)")
        flask = [sys.executable, "-m", "flask", "--app", "webapp"]
        subprocess.run([*flask, "init-db"], env=env, check=True)
        print(" * Serving on http://127.0.0.1:5000  (Ctrl-C stops the app and the servers)")
        refund_worker = subprocess.Popen([sys.executable, "-m", "webapp.refunds.worker"],
                                         env=env)
        # The production gunicorn settings (JSON request log, metrics summed over
        # workers), on loopback and smaller.
        env.setdefault("BIND", "127.0.0.1:5000")
        env.setdefault("WEB_CONCURRENCY", "2")
        env.setdefault("WEB_THREADS", "4")
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(INSTANCE / "metrics"))
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf",
             "webapp:create_app()"], env=env)
        try:
            return gunicorn.wait()
        finally:
            # SIGTERM: the refund worker finishes what is in flight, then exits.
            for process in (gunicorn, refund_worker):
                process.terminate()
            for process in (gunicorn, refund_worker):
                process.wait(30)
    except KeyboardInterrupt:
        return 0
    finally:
        for server in reversed(servers):
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
