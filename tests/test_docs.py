"""The docs a developer copies from cannot drift from the code.

The library's narrative is flask-submit-once/docs/pattern.md, part of its Sphinx docs (built
with warnings as errors by flask-submit-once/tests/test_docs.py); the shop's docs link to it.
"""

from __future__ import annotations

import re
from pathlib import Path

import redis
from flask import Flask

from submit_once import FormTokens

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "flask-submit-once"
PATTERN = LIBRARY / "docs/pattern.md"


def test_the_shop_docs_point_at_the_library_docs_not_the_pages_they_replaced():
    assert not (ROOT / "docs/PATTERN.md").exists() and not (ROOT / "scripts/apidoc").exists()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for gone in ("docs/PATTERN.md", "PYTHON_REFERENCE.md", "scripts/apidoc"):
            assert gone not in text, f"{page.name} still names {gone}"


def test_pattern_doc_links_resolve():
    text = PATTERN.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (PATTERN.parent / target).exists(), target
    # The files the copy table lists are the package's own.
    listed = set(re.findall(r"^\| `(submit_once/\w+\.py)` \|", text, re.M))
    assert {"submit_once/tokens.py", "submit_once/runner.py", "submit_once/extension.py",
            "submit_once/signals.py", "submit_once/redis_urls.py"} <= listed
    for path in listed:
        assert (LIBRARY / "src" / path).exists(), path
    assert (ROOT / "examples/newsletter/app.py").exists() and "examples/newsletter/app.py" in text
    assert "```mermaid" in text and "sequenceDiagram" in text


def test_pattern_doc_names_every_setting_the_extension_reads_and_only_those():
    """One spelling everywhere: the settings table is the extension's own keys."""
    text = PATTERN.read_text()
    source = (LIBRARY / "src/submit_once/extension.py").read_text()
    read = set(re.findall(r'setdefault\("(FORM_TOKENS_\w+)"', source))
    assert len(read) == 9
    assert set(re.findall(r"`(FORM_TOKENS_\w+)`", text)) == read
    for old in ("FORM_TOKEN_TTL", "SUBMIT_WAIT_SECONDS", "MAX_FORMS_PER_SESSION",
                "FORM_TOKENS_WAIT`", "three small files"):
        assert old not in text


def test_pattern_doc_gives_the_defaults_init_app_sets():
    app = Flask(__name__)
    FormTokens(app, client=redis.Redis())  # no command is sent: nothing needs to listen
    table = dict(re.findall(r"^\| `(FORM_TOKENS_\w+)` \| `([^`]*)` \|", PATTERN.read_text(),
                            re.M))
    assert table.pop("FORM_TOKENS_REDIS_URL") == "REDIS_URL"
    assert table == {key: str(app.config[key]) for key in table}
    assert len(table) == 8


def test_pattern_doc_lists_every_package_a_copier_needs():
    text = PATTERN.read_text()
    for package in ("flask", "flask-wtf", "email-validator", "redis", "sqlalchemy", "psycopg",
                    "blinker"):
        assert f"`{package}" in text, package
