"""A PostgreSQL primary and a streaming standby from the pgserver binaries.

Built only from :class:`dev.embedded.EmbeddedPostgres`'s public surface
(``start``/``stop``/``_run``/``data_dir``/``port``/``password``/``conninfo``), so each
instance runs as that class runs it (as the ``pgserver`` user when we are root)::

    primary:  initdb, started; ALTER SYSTEM for replication (and synchronous_standby_names)
    standby:  pg_basebackup -R from the primary into its own data folder, own port
    failover: SIGKILL the primary's postmaster and every backend, pg_ctl promote the standby
    again:    a new standby from the promoted server, on the dead primary's port
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from contextlib import suppress
from pathlib import Path

import psycopg

from dev.embedded import EmbeddedPostgres
from tests.support.live import child_pids

__all__ = ["ReplicatedPostgres"]


def _postmaster_pid(server: EmbeddedPostgres) -> int:
    return int((server.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])


class ReplicatedPostgres:
    """A primary and one standby on 127.0.0.1, their own ports.

    :param synchronous: ``synchronous_standby_names = '*'`` with
        ``synchronous_commit = on``: a COMMIT returns only once the standby has
        the WAL on disk. Otherwise replication is asynchronous (the default).
    """

    def __init__(self, base: Path, *, synchronous: bool) -> None:
        self.base = base
        # throwaway: when root keeps the data in a folder of the server's user,
        # that folder goes when the test ends (stop() below).
        self.primary = EmbeddedPostgres(base / "server0", throwaway=True)
        self.standby = EmbeddedPostgres(base / "server1", throwaway=True)
        self.servers = [self.primary, self.standby]
        self.synchronous = synchronous

    def url(self, database: str) -> str:
        """A multi-host URL: libpq tries each host and keeps the one that takes writes.
        One password for both: a standby is a copy of its primary, roles and all."""
        return (
            f"postgresql+psycopg://postgres:{self.primary.password}@/{database}"
            f"?host=127.0.0.1:{self.primary.port}&host=127.0.0.1:{self.standby.port}"
            "&target_session_attrs=read-write"
        )

    def start(self, database: str) -> ReplicatedPostgres:
        self.primary.start()
        self.primary.create_database(database)
        settings = {
            # Throwaway clusters: no fsync (a SIGKILL of the server loses nothing
            # the OS already has; only a machine crash would).
            "fsync": "off",
            "full_page_writes": "off",
            "synchronous_commit": "on",
            "wal_sender_timeout": "'5s'",
        }
        self._sql(
            self.primary,
            *(f"ALTER SYSTEM SET {k} = {v}" for k, v in settings.items()),
            "SELECT pg_reload_conf()",
        )
        self._make_standby()
        self.standby.start()
        self._replicate()
        return self

    def _replicate(self) -> None:
        if self.synchronous:
            self._sql(
                self.primary,
                "ALTER SYSTEM SET synchronous_standby_names = '*'",
                "SELECT pg_reload_conf()",
            )
        self.wait_streaming()

    def rebuild_standby(self) -> None:
        """After a failover: a new standby from the promoted primary, in a fresh data
        folder on the dead primary's port, so the app's host list stays the same."""
        self.standby = EmbeddedPostgres(
            self.base / f"server{len(self.servers)}", port=self.standby.port, throwaway=True
        )
        self.servers.append(self.standby)
        self._make_standby()
        self.standby.start()
        self._replicate()

    def _make_standby(self) -> None:
        # start() then stop() gives a data folder the server's user owns, wherever
        # EmbeddedPostgres keeps it; pg_basebackup wants it empty.
        self.standby.start()
        self.standby.stop("immediate")
        for child in self.standby.data_dir.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        # -R writes this connection string, password included, for the standby to stream
        # with; the copy brings the primary's password file, which the standby's start reads.
        result = self.standby._run(
            "pg_basebackup",
            "-d",
            self.primary.conninfo(),
            "-D",
            str(self.standby.data_dir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed:\n{result.stdout}")

    def _sql(self, server: EmbeddedPostgres, *statements: str) -> list[tuple] | None:
        """Run ``statements`` (autocommit: ALTER SYSTEM wants it); the last one's rows."""
        with psycopg.connect(server.conninfo(), autocommit=True, connect_timeout=3) as conn:
            rows = None
            for statement in statements:
                cursor = conn.execute(statement)
                rows = cursor.fetchall() if cursor.description else None
            return rows

    def wait_streaming(self, timeout: float = 30) -> None:
        """Until the primary sees the standby streaming (and, if synchronous, as sync)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self._sql(self.primary, "SELECT state, sync_state FROM pg_stat_replication")
            if rows and rows[0][0] == "streaming" and rows[0][1] == want:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the standby did not reach streaming/{want} within {timeout}s")

    def walreceiver_pid(self) -> int:
        postmaster = _postmaster_pid(self.standby)
        for pid in child_pids(postmaster):
            with suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"postgres: walreceiver"):
                    return pid
        raise RuntimeError("the standby has no walreceiver process")

    def hold_standby(self) -> int:
        """Stop the standby's WAL receiver (SIGSTOP): it falls behind; returns its pid."""
        pid = self.walreceiver_pid()
        os.kill(pid, signal.SIGSTOP)
        return pid

    def kill_primary(self) -> None:
        """A crash: the postmaster and every backend die at once (SIGKILL)."""
        postmaster = _postmaster_pid(self.primary)
        backends = child_pids(postmaster)
        os.kill(postmaster, signal.SIGKILL)
        for pid in backends:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        """``pg_ctl promote -w``: the standby ends recovery and takes writes; from
        here on it is ``primary`` (and the dead one ``standby``)."""
        result = self.standby._run(
            "pg_ctl", "-D", str(self.standby.data_dir), "promote", "-w", "-t", "30", check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl promote failed:\n{result.stdout}")
        self.primary, self.standby = self.standby, self.primary

    def standalone(self) -> None:
        """On the promoted server: commit without waiting for a standby.

        It came with the primary's ``synchronous_standby_names`` (pg_basebackup
        copies postgresql.auto.conf), and with no standby of its own left every
        COMMIT would wait forever: the failover tool must clear it (Patroni's
        synchronous_mode does) or a second standby must be there to take the role.
        """
        self._sql(
            self.primary,
            "ALTER SYSTEM SET synchronous_standby_names = ''",
            "SELECT pg_reload_conf()",
        )

    def stop(self) -> None:
        """Stop every server at once and delete what was made for it."""
        for server in reversed(self.servers):
            with suppress(Exception):
                server.remove()

    def drop_unreceived_wal(self, walreceiver: int) -> None:
        """Kill the held WAL receiver with what sat in its socket unread: the WAL the
        dead primary had sent is gone, as on a network that dropped it. The standby's
        postmaster restarts its processes (still a standby); wait until it answers."""
        os.kill(walreceiver, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._sql(self.standby, "SELECT pg_is_in_recovery()") == [(True,)]:
                    return
            except psycopg.Error:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not come back after its restart")
            time.sleep(0.05)
