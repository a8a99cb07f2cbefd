"""PostgreSQL and Redis of the fault tests' own, on free ports.

The fault tests stop, kill, flush and restart their servers; doing that to the
session's shared ``servers`` would break every other test running after them.
These two processes belong to tests/faults alone: started once for the
package, brought back up and cleaned before every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import (
    Servers,
    app_factory,
    assert_every_key_expires,
    reset_state,
    running_servers,
)


class FaultServers(Servers):
    """The test servers, plus what a fault test does to them."""

    def postgres_running(self) -> bool:
        return (
            self.postgres._run(
                "pg_ctl", "-D", str(self.postgres.data_dir), "status", check=False
            ).returncode
            == 0
        )

    def ensure_up(self) -> None:
        """Start whichever server a previous test left down."""
        if self.redis.process is None or self.redis.process.poll() is not None:
            self.redis.start()
        if not self.postgres_running():
            self.postgres.start()


@pytest.fixture(scope="package")
def fault_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServers]:
    # Persistent Redis (append-only file): a clean stop and start keeps the tokens,
    # as a production Redis with persistence would.
    with running_servers(
        tmp_path_factory.mktemp("fault-servers"), FaultServers, persist_redis=True
    ) as started:
        yield started


@pytest.fixture(autouse=True)
def fault_clean_state(fault_servers: FaultServers) -> Iterator[None]:
    """Both servers up, no orders, no tokens, the catalogue on sale; afterwards,
    every key the test left has a TTL."""
    fault_servers.ensure_up()
    # connections to a restarted server are dead
    fault_servers.engine.dispose()
    reset_state(fault_servers)
    yield
    fault_servers.ensure_up()
    assert_every_key_expires(fault_servers.redis.url)


@pytest.fixture
def fault_app(fault_servers: FaultServers):
    """Build apps on the fault servers; their pools are closed afterwards."""
    with app_factory(fault_servers) as make:
        yield make
