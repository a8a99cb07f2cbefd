"""The docs a developer copies from cannot drift from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_python_reference_matches_the_docstrings():
    result = subprocess.run([sys.executable, str(ROOT / "scripts/apidoc"), "--check"])
    assert result.returncode == 0, "docs/PYTHON_REFERENCE.md is stale: run scripts/apidoc"
    assert not (ROOT / "docs/API.md").exists(), "the Python reference is PYTHON_REFERENCE.md"
    reference = (ROOT / "docs/PYTHON_REFERENCE.md").read_text()
    for name in ("token_issued", "token_consumed", "submit_committed", "submit_decided",
                 "Unavailable"):
        assert name in reference


def test_pattern_doc_links_resolve():
    text = (ROOT / "docs/PATTERN.md").read_text()
    for path in ("submit_once/tokens.py", "submit_once/runner.py", "submit_once/extension.py",
                 "submit_once/signals.py", "submit_once/redis_urls.py",
                 "examples/newsletter/app.py", "PYTHON_REFERENCE.md"):
        assert path in text and ((ROOT / path).exists() or (ROOT / "docs" / path).exists())
    assert "```mermaid" in text and "sequenceDiagram" in text


def test_pattern_doc_names_every_setting_the_extension_reads_and_only_those():
    """One spelling everywhere: the settings table is the extension's own keys."""
    text = (ROOT / "docs/PATTERN.md").read_text()
    source = (ROOT / "submit_once/extension.py").read_text()
    read = set(re.findall(r'setdefault\("(FORM_TOKENS_\w+)"', source))
    assert len(read) == 8
    assert set(re.findall(r"`(FORM_TOKENS_\w+)`", text)) == read
    for old in ("FORM_TOKEN_TTL", "SUBMIT_WAIT_SECONDS", "MAX_FORMS_PER_SESSION",
                "FORM_TOKENS_WAIT`", "three small files"):
        assert old not in text


def test_pattern_doc_lists_every_package_a_copier_needs():
    text = (ROOT / "docs/PATTERN.md").read_text()
    for package in ("flask", "flask-wtf", "email-validator", "redis", "sqlalchemy", "psycopg",
                    "blinker"):
        assert f"`{package}" in text, package
