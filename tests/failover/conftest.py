"""The failover soaks: short in the default run, long from scripts/soak.

``SOAK_SECONDS`` sets how long each soak keeps the load on (default 12 s:
the suite's short form: one failover among some 300-470 forms and 500-800 submits, or
25-50 card customers with 2 Redis restarts and each provider fault); ``scripts/soak --minutes 5``
sets it to 300. A failover soak's load ends no sooner than the first order placed after
its last crash (tests/failover/soak.py), so a slow recovery is measured, not cut off.
"""

from __future__ import annotations

import os

import pytest

# servers, two gunicorns, the failover itself, the checks
SETUP_SECONDS = 120


def soak_seconds() -> float:
    return float(os.environ.get("SOAK_SECONDS", "12"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("soak"):
            item.add_marker(pytest.mark.timeout(soak_seconds() + SETUP_SECONDS))


@pytest.fixture
def report(capsys: pytest.CaptureFixture[str]):
    """Print a soak's figures where they are seen (the terminal, not the capture)."""

    def write(line: str) -> None:
        with capsys.disabled():
            print(f"\n{line}")

    return write
