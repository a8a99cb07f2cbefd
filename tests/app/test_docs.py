"""The shop's docs cannot drift from the code.

The library's docs (flask-submit-once/README.md and docs/, its Sphinx site) are kept true by
the library's own flask-submit-once/tests/test_docs.py, which runs the code they show; the
shop's pages link to them. Every page of the shop a reader is sent to names only files that
exist, settings that something reads, and columns that the models have.
"""

from __future__ import annotations

import re
from pathlib import Path

import flask_wtf
import pytest
import redis
from flask import Flask

from flask_submit_once import TokenStore
from webapp.config import RENAMED
from webapp.shop.models import Base

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "flask-submit-once"
#: The shop's pages a reader is sent to. Not CHANGELOG.md: history names what things were.
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "bench/results/README.md",
]
by_name = pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))


def test_the_shop_docs_point_at_the_library_docs_not_the_pages_they_replaced():
    assert not (ROOT / "docs/PATTERN.md").exists() and not (ROOT / "scripts/apidoc").exists()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for gone in ("docs/PATTERN.md", "PYTHON_REFERENCE.md", "scripts/apidoc"):
            assert gone not in text, f"{page.name} still names {gone}"


# A path as the pages write one: a top-level folder of the repository (or of the library),
# then anything up to a space or punctuation. "…", "<…>" and "{…}" are placeholders.
PATH = re.compile(
    r"(?<![\w/.-])((?:\.ci|bench|dev|docs|examples|flask-submit-once|scripts"
    r"|static|templates|tests|webapp|src)/[\w./*<>{}…-]*[\w*/])"
)
#: Paths the pages name that are not in the repository, on purpose.
NOT_IN_THE_REPOSITORY = {}


def exists(page: Path, path: str) -> bool:
    # In the wheel, templates/ and static/ are webapp/templates/ and webapp/static/.
    path = re.sub(r"^webapp/(templates|static)\b", r"\1", path)
    for base in (ROOT, LIBRARY, LIBRARY / "src", page.parent):
        if any(base.glob(path)) if "*" in path else (base / path).exists():
            return True
    return False


@by_name
def test_every_file_a_page_names_exists(page):
    named = {path for path in PATH.findall(page.read_text()) if not re.search(r"[<>{}…]", path)}
    missing = sorted(path for path in named - set(NOT_IN_THE_REPOSITORY) if not exists(page, path))
    assert missing == [], f"{page.name} names files that are not there"


def test_the_path_check_reads_paths_as_the_pages_write_them():
    text = (
        "`webapp/orders/views.py`, (tests/faults/), bench/app.py. `examples/newsletter/`;"
        " webapp.orders.views, templates/orders/*.html, webapp/static/app.css"
    )
    assert PATH.findall(text) == [
        "webapp/orders/views.py",
        "tests/faults/",
        "bench/app.py",
        "examples/newsletter/",
        "templates/orders/*.html",
        "webapp/static/app.css",
    ]
    assert all(exists(ROOT / "docs/SHOP.md", path) for path in PATH.findall(text))
    assert not exists(ROOT / "README.md", "webapp/order_rules/find_order.py")


NAME = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w-])")
#: What the environment variables in the tests look like when the tests read them.
READ_BY_A_TEST = re.compile(r"""(?:environ\.get\(|environ\[|getenv\(|setenv\()\s*["']([A-Z]\w+)""")


def names_in_use() -> set[str]:
    """Every UPPER_CASE name of the code that ships or runs the shop (its settings, those
    of the library, Flask's and Flask-WTF's, the scripts' variables, constants), and the
    environment variables the tests read. Not the names that were renamed."""
    sources = [
        *ROOT.glob("webapp/**/*.py"),
        *LIBRARY.glob("src/**/*.py"),
        *ROOT.glob("bench/**/*.py"),
        *ROOT.glob("dev/**/*.py"),
        *ROOT.glob("examples/**/*.py"),
        *(ROOT / "scripts").iterdir(),
        ROOT / ".ci/run",
        ROOT / "docs/nginx.conf",
        LIBRARY / "noxfile.py",
        *Path(flask_wtf.__file__).parent.glob("*.py"),
    ]
    names = set(Flask.default_config)
    for source in sources:
        names |= set(NAME.findall(source.read_text()))
    for test in [*ROOT.glob("tests/**/*.py"), *LIBRARY.glob("tests/**/*.py")]:
        names |= set(READ_BY_A_TEST.findall(test.read_text()))
    return names - set(RENAMED) - {"SUBMIT_ONCE_WAIT"}


#: Upper-case names the pages give to other programs, on purpose.
OTHER_PROGRAMS_NAMES = {
    "ON_ERROR_STOP": "psql's variable, in DEPLOY.md's database step",
}


@by_name
def test_every_setting_a_page_names_is_one_the_code_reads(page):
    unknown = sorted(
        set(NAME.findall(page.read_text())) - names_in_use() - set(OTHER_PROGRAMS_NAMES)
    )
    assert unknown == [], f"{page.name} names settings nothing reads (renamed or gone)"


def test_the_setting_check_refuses_an_old_name():
    assert {
        "SUBMIT_ONCE_TTL_SECONDS",
        "SECRET_KEY",
        "WTF_CSRF_TIME_LIMIT",
        "TRUSTED_PROXIES",
    } <= names_in_use()
    assert "FORM_TOKEN_TTL" not in names_in_use()


COLUMNS = {table.name: set(table.columns.keys()) for table in Base.metadata.tables.values()}


def columns_named(text: str) -> set[tuple[str | None, str]]:
    """(table, column) for ``orders.paid_cents``; (None, column) for a column in SQL
    (``UNIQUE (a, b)``, ``WHERE a =``) or a backticked name shaped like one of ours
    (``*_digest``, ``*_fingerprint``, ``*_cents``, ``*_reference``). A line that tells of
    a rename names the old column on purpose."""
    tables = "|".join(map(re.escape, COLUMNS))
    found: set[tuple[str | None, str]] = set()
    for line in text.splitlines():
        if "renam" in line:
            continue
        found |= {
            (table, column)
            for table, column in re.findall(
                rf"(?<![\w./-])({tables})\.([a-z_][a-z0-9_]*)(?![\w(/.-])", line
            )
        }
        for group in re.findall(r"UNIQUE \(([\w, ]+)\)", line):
            found |= {(None, column.strip()) for column in group.split(",")}
        found |= {(None, column) for column in re.findall(r"WHERE (\w+) =", line)}
        found |= {
            (None, column)
            for column in re.findall(
                r"`([a-z]+(?:_[a-z0-9]+)*_(?:digest|fingerprint|cents|reference))`", line
            )
        }
    return found


@by_name
def test_every_column_a_page_names_is_in_the_models(page):
    ours = set().union(*COLUMNS.values())
    wrong = sorted(
        f"{table or '?'}.{column}"
        for table, column in columns_named(page.read_text())
        if column not in (COLUMNS[table] if table else ours)
    )
    assert wrong == [], f"{page.name} names columns the models do not have"


def test_the_column_check_sees_a_stale_column():
    text = (
        "INSERT order (UNIQUE (public_id, form_token_digest)); orders.paid_cents; "
        "`orders.total`; SELECT order WHERE submission_digest = ..."
    )
    assert columns_named(text) == {
        ("orders", "paid_cents"),
        ("orders", "total"),
        (None, "public_id"),
        (None, "form_token_digest"),
        (None, "submission_digest"),
    }
    assert "form_token_digest" not in set().union(*COLUMNS.values())
    assert "total" not in COLUMNS["orders"]


DEPLOY = ROOT / "docs/DEPLOY.md"


def test_deploy_is_an_operators_page_of_at_most_275_lines_with_its_history_elsewhere():
    text = DEPLOY.read_text()
    assert len(text.splitlines()) <= 275
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    assert len(headings) == len(set(headings)), "a heading twice"
    assert (ROOT / "CHANGELOG.md").exists() and "../CHANGELOG.md" in text
    for history in ("Migration 00", "Upgrading to", "before that was kept"):
        # upgrade notes live in CHANGELOG.md
        assert history not in text


def test_every_setting_the_shop_reads_is_in_the_readme_configuration_table():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    read: set[str] = set()
    for module in ("config.py", "refunds/settings.py", "gunicorn_conf.py", "metrics.py"):
        source = (ROOT / "webapp" / module).read_text()
        read |= set(re.findall(r"""environ(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)""", source))
        read |= set(
            re.findall(r"""(?:_int|_bool|number)\(environ, ["']([A-Z][A-Z0-9_]+)""", source)
        )
    assert {"REFUND_CONSUMER", "REFUND_MONITOR_BIND", "GUNICORN_CONTROL_SOCKET"} <= read
    assert sorted(read - documented) == []


SCALING = ROOT / "docs/SCALING.md"


def test_the_capacity_figures_are_the_latest_benchs():
    latest = (ROOT / "bench/results/latest.md").read_text()
    text = SCALING.read_text()
    commit = re.search(r"code: (\w+)", latest).group(1)
    cpu = float(re.search(r"^\| app CPU per order[^|]*\| ([\d.]+) ", latest, re.M).group(1))
    orders = re.search(r"^\| orders/s, full cycle[^|]*\| ([\d.]+) ", latest, re.M).group(1)
    trips = re.search(
        r"^\| Redis round trips per successful order[^|]*\| \*\*([\d.]+)\*\*", latest, re.M
    ).group(1)
    assert f"commit {commit}" in text
    assert f"| {cpu:.1f} ms |" in text and f"| {orders} (" in text
    assert f"| {float(trips):g} (`EVALSHA` at render, `GETDEL` at submit) |" in text


def test_the_redis_memory_per_token_is_what_a_real_redis_uses(tmp_path):
    """INFO memory before and after issuing tokens through the library's TokenStore."""
    from dev.embedded import EmbeddedRedis

    stated = int(
        re.search(
            r"^\| Redis `used_memory` per live token \| (\d+) B \|", SCALING.read_text(), re.M
        ).group(1)
    )
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    try:
        with redis.Redis.from_url(server.url) as client:
            store, count = TokenStore(client, ttl=3600), 50_000
            before = client.info("memory")["used_memory"]
            for i in range(count):
                store.create(session_id=f"session-{i % 1000}", form="order")
            measured = (client.info("memory")["used_memory"] - before) / count
    finally:
        server.stop()
    assert abs(measured - stated) <= 0.08 * stated, f"{measured:.1f} B a token"


def test_the_readme_is_a_doorway_and_the_benchmark_page_says_only_how_and_what():
    """README: what, two commands, configuration, links, in at most 150 lines. The
    benchmark's page: how to run it, how to read it, the latest figures."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "scripts/run" in readme and "scripts/test" in readme and "## Configuration" in readme
    bench = (ROOT / "bench/results/README.md").read_text()
    assert re.findall(r"^## (.+)$", bench, re.M) == ["Run", "Read", "Latest figures"]
