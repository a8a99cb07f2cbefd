"""The Sphinx docs build with warnings as errors, and document the whole public surface."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import submit_once

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def api_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("html")
    # -W: a warning (an unresolved reference, a docstring that is not valid reST) fails it.
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(DOCS), str(out)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return (out / "api.html").read_text()


def test_the_docs_build_without_a_warning(api_page: str) -> None:
    assert "The Flask extension" in api_page


@pytest.mark.parametrize("name", sorted(set(submit_once.__all__) - {"__version__"}))
def test_every_name_the_root_exports_is_documented(api_page: str, name: str) -> None:
    # Documented means an entry of its own (its anchor), not a mention in passing.
    assert re.search(rf'id="submit_once\.\w+\.{re.escape(name)}"', api_page), name


def test_the_shipped_inventories_are_what_make_inventories_writes() -> None:
    check = subprocess.run([sys.executable, str(DOCS / "make_inventories.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
