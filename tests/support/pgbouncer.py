"""Debian's PgBouncer for the tests, in front of the test PostgreSQL, pooling by transaction
as most hosted PostgreSQL is reached. Without it the tests that need it are skipped, saying
how to get it.

PgBouncer refuses to run as root: as root it runs as the unprivileged ``pgbouncer`` user
(created if missing), its config, password file, log and socket in a folder of that user's
own under the system temp folder (pytest's is private to root). It listens on a free port
on 127.0.0.1 and asks every client for the password (SCRAM), which it also uses to log in to
PostgreSQL."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from dev.embedded import EmbeddedPostgres, free_port

PGBOUNCER = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
)
needs_pgbouncer = pytest.mark.skipif(
    PGBOUNCER is None,
    reason="Debian's PgBouncer is not installed: scripts/test installs it as root, "
    "or run 'apt-get install pgbouncer'",
)
#: The user PgBouncer runs as when we are root.
SERVICE_USER = "pgbouncer"


class PgBouncer:
    """``pgbouncer`` on 127.0.0.1 in front of ``postgres``: every database, as its
    superuser, in ``pool_mode`` with ``pool_size`` server connections per database.
    ``settings`` are more lines for its ``[pgbouncer]`` section."""

    def __init__(
        self,
        postgres: EmbeddedPostgres,
        *,
        pool_mode: str = "transaction",
        pool_size: int = 4,
        **settings: str | int,
    ) -> None:
        self.postgres = postgres
        self.port = free_port()
        self.pool_mode, self.pool_size, self.settings = pool_mode, pool_size, settings
        self.user = SERVICE_USER if os.geteuid() == 0 else None
        self.folder: Path | None = None
        self.process: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        """A SQLAlchemy URL for ``database`` through PgBouncer (the same password)."""
        return self.postgres.url(database).replace(
            f"@127.0.0.1:{self.postgres.port}/", f"@127.0.0.1:{self.port}/"
        )

    def conninfo(self, database: str) -> str:
        return self.postgres.conninfo(database).replace(
            f"port={self.postgres.port}", f"port={self.port}"
        )

    def start(self) -> PgBouncer:
        assert PGBOUNCER is not None
        self.folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        # Debian's own defaults but for what a test's PgBouncer must have: its own port,
        # files and pool, and every database of the test cluster.
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": self.folder,
            "auth_type": "scram-sha-256",
            "auth_file": self.folder / "userlist.txt",
            "logfile": self.folder / "pgbouncer.log",
            "pidfile": self.folder / "pgbouncer.pid",
            "admin_users": "postgres",
            "pool_mode": self.pool_mode,
            "default_pool_size": self.pool_size,
            "max_client_conn": 1000,
            **self.settings,
        }
        lines = [
            "[databases]",
            f"* = host=127.0.0.1 port={self.postgres.port}",
            "[pgbouncer]",
            *(f"{name} = {value}" for name, value in settings.items()),
        ]
        (self.folder / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        userlist = self.folder / "userlist.txt"
        userlist.touch(mode=0o600)
        userlist.write_text(f'"postgres" "{self.postgres.password}"\n')
        run_as: dict[str, object] = {}
        if self.user is not None:
            from pgserver.utils import ensure_user_exists

            ensure_user_exists(self.user)
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, self.user, self.user)
            entry = pwd.getpwnam(self.user)
            run_as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.process = subprocess.Popen(
            [PGBOUNCER, "-q", str(self.folder / "pgbouncer.ini")],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **run_as,  # type: ignore[arg-type]
        )
        self._wait_until_it_answers()
        return self

    #: A bound, not a window: PgBouncer answers within milliseconds of its start.
    start_seconds = 30

    def _wait_until_it_answers(self) -> None:
        """Return once a client gets through PgBouncer to PostgreSQL."""
        assert self.process is not None
        deadline = time.monotonic() + self.start_seconds
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited while starting:\n{self.log()[-2000:]}")
            try:
                with psycopg.connect(self.conninfo("postgres"), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def admin(self, command: str) -> list[dict[str, object]]:
        """A command of PgBouncer's admin console (``SHOW SERVERS``...), its rows."""
        with psycopg.connect(self.conninfo("pgbouncer"), autocommit=True) as conn:
            cursor = conn.execute(command)
            names = [column.name for column in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def log(self) -> str:
        assert self.folder is not None
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop at once (SIGTERM: PgBouncer's immediate shutdown) and delete its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
