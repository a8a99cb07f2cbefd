"""The embedded servers (dev/embedded.py) leave the user's folders as they found them."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest
import redis

from dev.embedded import EmbeddedPostgres, EmbeddedRedis, _link_binaries


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
        private_folder, venv):
    postgres = EmbeddedPostgres(private_folder / "instance" / "postgres", fast=True,
                                throwaway=True)
    if venv == "private":  # the checkout's .venv inside the private folder, as in a fresh clone
        (private_folder / ".venv").mkdir()
        postgres.bin = _link_binaries(postgres.bin, private_folder / ".venv" / "site-packages")
    before = modes(private_folder)
    try:
        postgres.start()
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        postgres.stop()
        postgres.start()  # the data survives a restart, wherever it lives
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="postgres") as conn:
            assert conn.execute("SELECT n FROM kept").fetchone() == (42,)
        assert modes(private_folder) == before
        home, binaries = postgres.home, postgres.bin
    finally:
        postgres.remove()
    assert modes(private_folder) == before
    if os.geteuid() == 0:  # the service user could not reach the folder: a home of its own
        assert home is not None and not home.is_relative_to(private_folder)
        assert not binaries.is_relative_to(private_folder)
        assert not home.exists(), "the throwaway cluster's folder was left behind"


def test_redis_in_a_private_folder_works_and_opens_no_folder(private_folder):
    before = modes(private_folder)
    store = EmbeddedRedis(private_folder / "instance" / "redis", persist=True).start()
    try:
        with redis.Redis.from_url(store.url) as client:
            assert client.set("k", "v", ex=60) and client.get("k") == b"v"
    finally:
        store.stop()
    assert modes(private_folder) == before
