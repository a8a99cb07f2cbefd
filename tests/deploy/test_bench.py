"""The benchmark is a client of the library like any other: it imports only public names
of ``flask_submit_once``, and it stays smaller than the library it measures; and its short
form runs (CI runs it here)."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "flask-submit-once/src/flask_submit_once"


def library_names_imported(path: Path) -> set[tuple[str, str]]:
    """(module, name) for every ``from flask_submit_once... import name`` in ``path``."""
    return {
        (node.module, alias.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.level == 0
        and (node.module or "").split(".")[0] == "flask_submit_once"
        for alias in node.names
    }


def test_the_benchmark_imports_only_public_names_of_the_library():
    imported = set().union(*map(library_names_imported, ROOT.glob("bench/*.py")))
    # the walk found the imports
    assert ("flask_submit_once", "TokenStore") in imported
    for module, name in sorted(imported):
        public = getattr(importlib.import_module(module), "__all__", ())
        assert name in public, f"bench imports {module}.{name}, which is not public"
        assert not any(part.startswith("_") for part in module.split(".")), module


def test_the_benchmark_is_smaller_than_the_library():
    def lines(paths) -> int:
        return sum(len(path.read_text().splitlines()) for path in paths)

    assert lines(ROOT.glob("bench/**/*.py")) < lines(LIBRARY.glob("*.py"))


@pytest.mark.timeout(300)
def test_the_benchmarks_short_form_runs_every_variant_and_prints_the_targets(tmp_path):
    """scripts/bench's every step once (``--smoke``: real PostgreSQL, Redis and gunicorn,
    a fraction of a second a variant): each variant's cycles end on their page, the storm
    makes one order, and the table gives every figure the targets are read from."""
    run = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    table = (tmp_path / "latest.md").read_text()
    figures = json.loads((tmp_path / "latest.json").read_text())["figures"]
    for variant in ("tokens", "baseline", "floor", "nonce", "lean_once", "lean", "lean_floor"):
        assert figures[f"orders_per_s.{variant}"]["min"] > 0, variant
        assert figures[f"pg_round_trips_per_post.{variant}"]["min"] >= 2, variant
    per_level = re.search(r"^\| 2 \|.*\| ([\d /]+) \|$", table, re.M)
    assert per_level and set(per_level.group(1).split(" / ")) == {"0"}, "failed cycles"
    assert re.search(
        r"^Targets, on the medians: tokens − floor .* lean_once − lean_floor ", table, re.M
    )
    assert figures["storm.tokens.orders"]["max"] == 1 == figures["storm.nonce.orders"]["max"]
    assert round(figures["redis_round_trips_per_order.tokens"]["median"]) == 2


@pytest.mark.timeout(120)
def test_the_in_place_split_runs_and_adds_up(tmp_path):
    """scripts/bench --in-place, two cycles a variant: each request's parts add up to it."""
    run = subprocess.run(
        [sys.executable, "-m", "bench.inplace", "--cycles", "2", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = re.findall(
        r"^\| POST \| ([^|]+) \| (\d+) \| (\d+) \|", (tmp_path / "inplace.md").read_text(), re.M
    )
    parts = {part.strip(): (int(tokens), int(floor)) for part, tokens, floor in rows}
    assert parts["SQLAlchemy + psycopg"][0] > 0 and parts["redis-py"][1] > 0
    # rounded parts: within a µs each of the whole
    for which in (0, 1):
        assert abs(
            sum(v[which] for k, v in parts.items() if k != "all") - parts["all"][which]
        ) <= len(parts)
