"""The docs a developer copies from cannot drift from the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_api_reference_matches_the_docstrings():
    result = subprocess.run([sys.executable, str(ROOT / "scripts/apidoc"), "--check"])
    assert result.returncode == 0, "docs/API.md is stale: run scripts/apidoc"


def test_pattern_doc_links_resolve():
    text = (ROOT / "docs/PATTERN.md").read_text()
    for path in ("submit_once/tokens.py", "submit_once/runner.py", "submit_once/extension.py",
                 "examples/newsletter/app.py"):
        assert path in text and (ROOT / path).exists()
    assert "```mermaid" in text and "sequenceDiagram" in text
