"""The embedded servers (dev/embedded.py) leave the user's folders as they found them;
scripts/run (dev/run.py) stops all it started on any signal, and starts nothing over
servers it did not start."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
import redis

from dev.embedded import EmbeddedPostgres, EmbeddedRedis, _link_binaries, free_port
from dev.ports import in_use
from dev.run import PROVIDER_PORT
from tests.support.live import child_pids, request

ROOT = Path(__file__).resolve().parents[2]


def modes(path: Path) -> dict[Path, int]:
    """The mode of ``path`` and of every folder above it."""
    return {folder: folder.stat().st_mode for folder in (path, *path.parents)}


@pytest.fixture
def private_folder(tmp_path: Path) -> Path:
    """A 0700 folder inside another 0700 folder, as root's home or ``mktemp -d`` make."""
    parent = tmp_path / "home"
    parent.mkdir(mode=0o700)
    folder = parent / "checkout"
    folder.mkdir(mode=0o700)
    return folder


@pytest.mark.parametrize("venv", ["reachable", "private"])
def test_postgres_asked_to_keep_its_data_in_a_private_folder_works_and_opens_no_folder(
    private_folder, venv
):
    postgres = EmbeddedPostgres(private_folder / "instance" / "postgres", fast=True, throwaway=True)
    # the checkout's .venv inside the private folder, as in a fresh clone
    if venv == "private":
        (private_folder / ".venv").mkdir()
        postgres.bin = _link_binaries(postgres.bin, private_folder / ".venv" / "site-packages")
    before = modes(private_folder)
    try:
        postgres.start()
        with psycopg.connect(postgres.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        postgres.stop()
        # the data survives a restart, wherever it lives
        postgres.start()
        with psycopg.connect(postgres.conninfo()) as conn:
            assert conn.execute("SELECT n FROM kept").fetchone() == (42,)
        assert modes(private_folder) == before
        home, binaries = postgres.home, postgres.bin
    finally:
        postgres.remove()
    assert modes(private_folder) == before
    # the service user could not reach the folder: a home of its own
    if os.geteuid() == 0:
        assert home is not None and not home.is_relative_to(private_folder)
        assert not binaries.is_relative_to(private_folder)
        assert not home.exists(), "the throwaway cluster's folder was left behind"


def connect_without_the_password(postgres: EmbeddedPostgres, **password: str):
    return psycopg.connect(
        host="127.0.0.1",
        port=postgres.port,
        user="postgres",
        dbname="postgres",
        connect_timeout=5,
        **password,
    )


def groups_of_the_servers_programs(postgres: EmbeddedPostgres) -> list[str]:
    """What a superuser's COPY ... FROM PROGRAM runs as: the ids of its groups."""
    with psycopg.connect(postgres.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE ran (line text)")
        conn.execute("COPY ran FROM PROGRAM 'id -G'")
        return conn.execute("SELECT line FROM ran").fetchone()[0].split()


@pytest.fixture
def postgres(tmp_path: Path):
    server = EmbeddedPostgres(tmp_path / "postgres", fast=True, throwaway=True)
    yield server.start()
    server.remove()


@pytest.mark.parametrize(
    "password", [{}, {"password": "postgres"}, {"password": ""}], ids=["none", "a guess", "empty"]
)
def test_postgres_refuses_a_connection_without_its_password(postgres, password):
    """Before, every local user was a trusted superuser: COPY ... TO PROGRAM 'id' ran
    uid=1001(pgserver) gid=0(root) for anyone on the machine."""
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect_without_the_password(postgres, **password).close()
    # what url() and conninfo() carry
    with psycopg.connect(postgres.conninfo()) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's server runs as another user")
def test_as_root_postgres_runs_with_its_users_group_not_roots(postgres):
    assert postgres.user == "pgserver"
    assert "0" not in groups_of_the_servers_programs(postgres)


def test_a_cluster_that_trusted_everyone_gets_a_password_and_keeps_its_data(postgres):
    """A cluster kept by an earlier scripts/run (made with --auth=trust) is secured at
    its next start, its data kept."""
    with psycopg.connect(postgres.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (7)")
    postgres.stop()
    (postgres.data_dir / "embedded-password").unlink()
    (postgres.data_dir / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n")
    old_password = postgres.password
    postgres.start()
    assert postgres.password != old_password
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect_without_the_password(postgres).close()
    with psycopg.connect(postgres.conninfo()) as conn:
        assert conn.execute("SELECT n FROM kept").fetchone() == (7,)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's PostgreSQL runs as another user")
def test_as_root_scripts_run_keeps_reaching_its_data_from_instance_and_finds_it_again(
    private_folder,
):
    """Before: as root in a private checkout the data went to /var/lib/pgserver/… and
    nothing in instance/ led there. Now instance/postgres links to it, the next run
    finds the same cluster through the link, and no folder's mode changed."""
    from dev.run import link_instance

    wanted = private_folder / "instance" / "postgres"
    before = modes(private_folder)
    # kept, as scripts/run keeps it
    first = EmbeddedPostgres(wanted, fast=True).start()
    again = None
    try:
        told = link_instance(first)
        assert told and f"{wanted} links to it" in told
        assert wanted.is_symlink() and wanted.resolve() == first.data_dir.resolve()
        # root reads the cluster through instance/
        assert (wanted / "PG_VERSION").exists()
        with psycopg.connect(first.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        first.stop()
        # the next run
        again = EmbeddedPostgres(wanted, fast=True).start()
        try:
            assert again.data_dir == first.data_dir and link_instance(again) == told
            # the password kept in the data
            with psycopg.connect(again.conninfo()) as conn:
                assert conn.execute("SELECT n FROM kept").fetchone() == (42,)
        finally:
            again.stop()
        assert modes(private_folder) == before
    finally:
        clusters = [cluster for cluster in (first, again) if cluster is not None]
        # both first: they share one home, and its binaries
        for cluster in clusters:
            # (there in a private checkout, whose venv is not)
            cluster.stop("immediate")
        for cluster in clusters:
            if cluster.home is not None:
                shutil.rmtree(cluster.home, ignore_errors=True)


def test_redis_in_a_private_folder_works_and_opens_no_folder(private_folder):
    before = modes(private_folder)
    store = EmbeddedRedis(private_folder / "instance" / "redis", persist=True).start()
    try:
        with redis.Redis.from_url(store.url) as client:
            assert client.set("k", "v", ex=60) and client.get("k") == b"v"
    finally:
        store.stop()
    assert modes(private_folder) == before


def test_a_restarted_redis_answers_the_first_command_after_start(tmp_path):
    # A restarted server listens at once but answers LOADING while it reads its
    # append-only file back: start() returns only once it answers commands (a test
    # that restarted Redis then asked for a form got 503 from a still-loading server).
    store = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    try:
        with redis.Redis.from_url(store.url) as client:
            # 100,000 commands to read back
            with client.pipeline(transaction=False) as pipe:
                for n in range(100_000):
                    pipe.set(f"k{n}", "v")
                pipe.execute()
        store.stop()
        store.start()
        with redis.Redis.from_url(store.url) as client:
            assert client.get("k99999") == b"v"
    finally:
        store.stop()


class DevRun:
    """``python -m dev.run`` (what scripts/run execs) in a session of its own, as a
    terminal runs it, on ports and a folder of its own; the test PostgreSQL. Never on the
    ports a human's scripts/run takes (its card provider's 8765 among them): the suite
    runs beside one."""

    def __init__(self, servers, tmp_path: Path, **env: str) -> None:
        self.redis_port, self.port = free_port(), free_port()
        self.env = {
            **os.environ,
            "APP_ENV": "development",
            "DEV_INSTANCE": str(tmp_path),
            "DEV_REDIS_PORT": str(self.redis_port),
            "DEV_PROVIDER_PORT": "0",
            "DATABASE_URL": servers.database_url,
            "BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": "1",
            **env,
        }
        for name in ("REDIS_URL", "PAYMENT_PROVIDER_URL"):
            self.env.pop(name, None)
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dev.run"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def wait_serving(self) -> str:
        deadline = time.monotonic() + 90
        while "Serving on" not in self.output():
            assert self.process.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.1)
        return self.output()

    def provider_port(self) -> int:
        """The port the card provider said it listens on."""
        said = re.search(r"Payment provider on http://127\.0\.0\.1:(\d+) ", self.output())
        assert said, self.output()
        return int(said[1])

    def descendants(self) -> list[int]:
        found, todo = [], [self.process.pid]
        while todo:
            children = child_pids(todo.pop())
            found += children
            todo += children
        return found

    def close(self) -> None:
        """Kill what is left, the servers too: they run in sessions of their own."""
        if self.process.poll() is None:
            left = self.descendants()
            os.killpg(self.process.pid, signal.SIGKILL)
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.process.wait(10)
        self.log.close()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    # a zombie has exited; only its parent's wait is missing
    return state != "Z"


@pytest.fixture
def dev_run(servers, tmp_path):
    runs: list[DevRun] = []

    def start(**env: str) -> DevRun:
        runs.append(DevRun(servers, tmp_path / f"instance-{len(runs)}", **env))
        return runs[-1]

    yield start
    for run in runs:
        run.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["SIGHUP to the terminal's group", "Ctrl-C", "SIGTERM"])
def test_closing_the_terminal_stops_everything_as_ctrl_c_and_sigterm_do(dev_run, how):
    run = dev_run()
    output = run.wait_serving()
    # Port 5000 named nowhere (a free port such as 50003 may begin with those digits).
    assert f"Serving on http://127.0.0.1:{run.port} " in output
    assert not re.search(r":5000\b", output)
    assert request(run.port, "GET", "/healthz").status == 200
    provider = run.provider_port()
    assert provider != PROVIDER_PORT and request(provider, "GET", "/healthz").status == 200
    started = run.descendants()
    # Redis, the refund worker, gunicorn and its worker
    assert len(started) >= 4
    # a process manager signals the process itself
    if how == "SIGTERM":
        os.kill(run.process.pid, signal.SIGTERM)
    # the terminal signals its whole foreground group
    else:
        os.killpg(run.process.pid, signal.SIGHUP if how.startswith("SIGHUP") else signal.SIGINT)
    # Waited for as long as scripts/run may itself take to stop on a loaded machine: 30 s
    # for each process it started, then Redis (10 s) and pg_ctl (60 s). It took over 60 s
    # once at the start of a fresh clone's suite, beside the wheel's installs.
    assert run.process.wait(180) == 0, run.output()
    deadline = time.monotonic() + 30
    while [pid for pid in started if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in started if alive(pid)] == [], run.output()
    assert not any(in_use("127.0.0.1", port) for port in (run.port, run.redis_port, provider))


def test_scripts_run_serves_on_its_own_postgres_with_the_password_and_finds_it_again(dev_run):
    # A folder the server's user can reach, so the data stays in it (not /var/lib/pgserver).
    instance = Path(tempfile.mkdtemp(prefix="dev-run-", dir="/tmp"))
    instance.chmod(0o755)
    pg_port = free_port()
    try:
        run = dev_run(DATABASE_URL="", DEV_PG_PORT=str(pg_port), DEV_INSTANCE=str(instance))
        output = run.wait_serving()
        assert f"PostgreSQL 16 on 127.0.0.1:{pg_port}" in output
        # the app's URL works
        assert request(run.port, "GET", "/readyz").status == 200
        os.kill(run.process.pid, signal.SIGTERM)
        assert run.process.wait(60) == 0, run.output()
        # the next run
        postgres = EmbeddedPostgres(instance / "postgres", pg_port).start()
        try:
            assert postgres.data_dir == instance / "postgres"
            assert postgres.password is not None and postgres.password not in output
            with psycopg.connect(postgres.conninfo("webapp")) as conn:
                assert conn.execute("SELECT count(*) FROM products").fetchone()[0] > 0
            with pytest.raises(psycopg.OperationalError, match="password"):
                connect_without_the_password(postgres).close()
        finally:
            postgres.stop()
    finally:
        shutil.rmtree(instance, ignore_errors=True)


def test_it_refuses_to_start_over_a_redis_it_did_not_start_and_says_what_to_do(dev_run, tmp_path):
    # a killed run's Redis
    left = EmbeddedRedis(tmp_path / "left", persist=False).start()
    try:
        with redis.Redis.from_url(left.url) as client:
            client.set("kept", "1", ex=60)
        run = dev_run(DEV_REDIS_PORT=str(left.port))
        assert run.process.wait(60) == 1
        said = run.output()
        assert (
            f"127.0.0.1:{left.port}, where Redis would listen, is in use by process "
            f"{left.process.pid} (redis-server)" in said
        )
        assert "Stop it" in said and "REDIS_URL" in said
        assert "Serving on" not in said and "init-db" not in said
        with redis.Redis.from_url(left.url) as client:
            # neither used nor stopped
            assert client.get("kept") == b"1"
    finally:
        left.stop()


def test_it_refuses_a_bind_address_that_is_taken_before_starting_anything(dev_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        run = dev_run(BIND=f"127.0.0.1:{taken.getsockname()[1]}")
        assert run.process.wait(60) == 1
        said = run.output()
    assert "where the app would listen, is in use by process" in said and "BIND" in said
    assert "Redis 6.2 on" not in said
    assert not in_use("127.0.0.1", run.redis_port)


def test_a_bind_without_a_port_is_checked_on_gunicorns_default_port(monkeypatch):
    """BIND=localhost is gunicorn's localhost:8000: checked there, not a traceback.
    (Gunicorn's port is moved to one the test holds: 8000 may be anyone's.)"""
    import dev.run

    urls = {
        "DATABASE_URL": "postgresql://h/db",
        "REDIS_URL": "redis://h:6379/0",
        "PAYMENT_PROVIDER_URL": "http://127.0.0.1:1",
    }
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(dev.run, "GUNICORN_PORT", port)
        assert f"127.0.0.1:{port}," in (dev.run.taken(urls, "127.0.0.1", 0, 0, 0) or "")
    assert dev.run.taken(urls, "127.0.0.1", 0, 0, 0) is None


def test_the_card_provider_takes_its_usual_port_when_free_and_another_when_not():
    """A suite's or another checkout's provider on 8765 does not stop scripts/run: its
    own moves to a free port (and says which); a port asked for is kept, and refused
    when taken. (The usual port is one the test holds: 8765 may be anyone's.)"""
    from dev.run import provider_port, taken

    urls = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        usual = held.getsockname()[1]
        moved = provider_port({}, preferred=usual)
        assert moved != usual and not in_use("127.0.0.1", moved)
        assert taken(urls, "127.0.0.1", 0, 0, moved) is None
        asked = {**urls, "DEV_PROVIDER_PORT": str(usual)}
        assert provider_port(asked) == usual
        said = taken(asked, "127.0.0.1", 0, 0, usual) or ""
        assert f"127.0.0.1:{usual}, where the card provider would listen, is in use" in said
    assert provider_port({}, preferred=usual) == usual
    assert provider_port({"DEV_PROVIDER_PORT": "0"}) > 0
