"""Each kind of form under storms over real HTTP, as gunicorn serves them: 2 worker
processes of 12 threads, 20 rounds of 20 concurrent duplicates a kind. A kept upload, the
last step of a form in several steps, an edit of a versioned row: one row a form, every
answer the one its kind gives (303 to the result; 409 for the tab whose edit went
stale), no 5xx, no connection left idle in a transaction. And a corrected upload sent
with a used token, to the worker that saw the first submit and to the other one: told it
differs, never taken to the first result. Each test prints its counts."""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import unescape
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

import edits_app
from signup_app import Letter, Signup

HERE = Path(__file__).resolve().parent / "apps"
ROUNDS, DUPLICATES = 20, 20
#: A scan large enough that gunicorn reads it in many chunks.
SCAN = bytes(range(256)) * 1024
CHANGED = "already used, with other details"
STALE = "changed since you opened it"


@contextmanager
def gunicorn(kind: str, redis_url: str, database_url: str) -> Iterator[int]:
    """``serve_gunicorn:create_app(kind)`` served by gunicorn (2 workers of 12 threads) on
    a socket bound here to a free port of 127.0.0.1 and handed over open: a request sent
    before a worker is up waits in its backlog, so no test polls for the server. Its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    log = tempfile.TemporaryFile("w+")
    env = {
        **os.environ,
        "SUBMIT_ONCE_TEST_REDIS_URL": redis_url,
        "SUBMIT_ONCE_TEST_DATABASE_URL": database_url,
    }
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", "--bind", f"fd://{listener.fileno()}"),
            *("--workers", "2", "--worker-class", "gthread", "--threads", "12"),
            # Long enough that a test's pinned connection stays with its worker.
            *("--keep-alive", "60", "--graceful-timeout", "2", "--chdir", str(HERE)),
            f'serve_gunicorn:create_app("{kind}")',
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        pass_fds=[listener.fileno()],
    )
    try:
        yield listener.getsockname()[1]
    finally:
        process.terminate()
        process.wait(20)
        listener.close()
        log.seek(0)
        output = log.read()
        log.close()
        assert "Traceback" not in output, output[-3000:]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str

    @property
    def worker(self) -> str:
        return self.headers["x-worker"]


def hidden(html: str) -> dict[str, str]:
    """Every hidden input of the page's form, as a browser sends them back."""
    return {
        name: unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html)
    }


def multipart(
    fields: Mapping[str, str], files: Mapping[str, tuple[str, bytes]]
) -> tuple[bytes, str]:
    """(body, Content-Type) of a multipart/form-data submit, as a browser encodes it."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    for name, (filename, content) in files.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/pdf\r\n\r\n'.encode()
            + content
            + b"\r\n"
        )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), (
        f"multipart/form-data; boundary={boundary}"
    )


@dataclass
class Browser:
    """One browser session: the cookies it was given, a new connection per request
    unless given one (``pinned``), which stays with the worker that accepted it."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def send(
        self,
        method: str,
        path: str,
        form: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes]] | None = None,
        pinned: http.client.HTTPConnection | None = None,
    ) -> Answer:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body: bytes | None = None
        if files is not None:
            body, headers["Content-Type"] = multipart(form or {}, files)
        elif form is not None:
            body = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = pinned or self.connect()
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            answer = Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read().decode(),
            )
        finally:
            if pinned is None:
                conn.close()
        for name, morsel in SimpleCookie(answer.headers.get("set-cookie", "")).items():
            self.cookies[name] = morsel.value
        return answer

    def storm(
        self, path: str, forms: list[Mapping[str, str]], files: Mapping | None = None
    ) -> list[Answer]:
        """Send every form at once, each on a connection of its own (its own copy of
        ``files``), all started together."""
        start = threading.Barrier(len(forms))

        def one(form: Mapping[str, str]) -> Answer:
            start.wait(60)
            return self.send("POST", path, form, files)

        with ThreadPoolExecutor(len(forms)) as pool:
            return list(pool.map(one, forms))

    def on_worker(self, path: str, other_than: str = "") -> http.client.HTTPConnection:
        """A kept-alive connection (GET ``path`` sent on it), accepted by any worker, or by
        one ``other_than`` that pid: new connections until one is, at most 200."""
        for _ in range(200):
            conn = self.connect()
            conn.request("GET", path, headers={"Cookie": f"session={self.cookies['session']}"})
            response = conn.getresponse()
            response.read()
            if response.getheader("X-Worker") != other_than:
                return conn
            conn.close()
        raise AssertionError("no connection was accepted by the worker wanted")


def tally(answers: list[Answer]) -> Counter[int]:
    return Counter(answer.status for answer in answers)


def report(shape: str, statuses: Counter[int], rows: int, stored: str, idle: int) -> None:
    print(
        f"\n{shape}: answers {dict(sorted(statuses.items()))}, rows {rows}, {stored}, "
        f"5xx {sum(n for status, n in statuses.items() if status >= 500)}, "
        f"idle in transaction {idle}"
    )


def letters(sessions: sessionmaker[Session]) -> list[tuple[str, bytes]]:
    with sessions() as db:
        return [
            (name, bytes(content))
            for name, content in db.execute(
                select(Letter.filename, Letter.content).order_by(Letter.id)
            )
        ]


def test_storms_of_one_upload_store_one_letter_a_form(
    redis_url, database_url, sessions, rdb, nothing_held
):
    statuses: Counter[int] = Counter()
    with gunicorn("letters", redis_url, database_url) as port:
        for round in range(ROUNDS):
            browser = Browser(port)
            form = {**hidden(browser.send("GET", "/letters").body), "note": f"Referral {round}"}
            answers = browser.storm(
                "/letters/send", [form] * DUPLICATES, {"letter": ("scan.pdf", SCAN)}
            )
            statuses += tally(answers)
            assert {(a.status, a.headers.get("location")) for a in answers} == {
                (303, f"/letters/{round + 1}")
            }
        idle, locks = nothing_held()
    stored = letters(sessions)
    report(
        "upload sent with each (256 KiB)",
        statuses,
        len(stored),
        f"letters stored {len(stored)}",
        idle,
    )
    assert stored == [("scan.pdf", SCAN)] * ROUNDS
    assert statuses == {303: ROUNDS * DUPLICATES} and (idle, locks) == (0, 0)
    # nothing kept: no form came back with a file to keep
    assert list(rdb.scan_iter("so:upload:*")) == []


def test_storms_of_a_corrected_submit_with_a_kept_upload_store_one_letter_a_form(
    redis_url, database_url, sessions, rdb, nothing_held
):
    """The note left empty: the form comes back (422) with the scan kept and its signed
    reference in the form; the note corrected and sent twenty times at once, the file
    input left empty as a browser leaves it, on either worker: one letter, the scan."""
    statuses: Counter[int] = Counter()
    with gunicorn("letters", redis_url, database_url) as port:
        for round in range(ROUNDS):
            browser = Browser(port)
            form = {**hidden(browser.send("GET", "/letters").body), "note": ""}
            invalid = browser.send("POST", "/letters/send", form, {"letter": ("scan.pdf", SCAN)})
            assert invalid.status == 422 and "Kept: scan.pdf" in invalid.body
            corrected = {**hidden(invalid.body), "note": f"Referral {round}"}
            assert corrected["form_token_kept"]
            answers = browser.storm(
                "/letters/send", [corrected] * DUPLICATES, {"letter": ("", b"")}
            )
            statuses += tally(answers)
            assert {(a.status, a.headers.get("location")) for a in answers} == {
                (303, f"/letters/{round + 1}")
            }
        idle, locks = nothing_held()
    stored = letters(sessions)
    kept = list(rdb.scan_iter("so:upload:*"))
    report(
        "kept upload, corrected (256 KiB)",
        statuses,
        len(stored),
        f"letters stored {len(stored)}, kept copies left {len(kept)}",
        idle,
    )
    assert stored == [("scan.pdf", SCAN)] * ROUNDS and kept == []
    assert statuses == {303: ROUNDS * DUPLICATES} and (idle, locks) == (0, 0)


LETTER = b"%PDF-1.4\nReferral for Ada Lovelace: knee, left.\n"
#: name: (file name, contents) sent again with the used token; None: the same file.
RESENT = {
    "same file again": ("letter.pdf", LETTER),
    "same name, other bytes": ("letter.pdf", LETTER.replace(b"left", b"right")),
    "other name, same bytes": ("letter-v2.pdf", LETTER),
    "large, last byte differs": ("letter.pdf", SCAN[:-1] + b"\x00"),
}


def test_a_corrected_upload_with_a_used_token_is_told_on_either_worker(
    redis_url, database_url, sessions, rdb, nothing_held
):
    """The first letter lands; the same page is sent again with another file, on the
    connection that sent the first (the worker that saw it) or on one the other worker
    accepted: told it differs (409), never taken to the first letter (303)."""
    told: list[tuple[str, str, int, bool]] = []
    with gunicorn("letters", redis_url, database_url) as port:
        for worker in ("same worker", "other worker"):
            for case, (name, content) in RESENT.items():
                browser = Browser(port)
                form = {**hidden(browser.send("GET", "/letters").body), "note": case}
                first_file = SCAN if case.startswith("large") else LETTER
                saw = browser.on_worker("/letters")
                first = browser.send(
                    "POST", "/letters/send", form, {"letter": ("letter.pdf", first_file)}, saw
                )
                assert first.status == 303
                if worker == "other worker":
                    saw.close()
                    saw = browser.on_worker("/letters", other_than=first.worker)
                again = browser.send(
                    "POST", "/letters/send", form, {"letter": (name, content)}, saw
                )
                saw.close()
                assert (again.worker == first.worker) == (worker == "same worker")
                told.append((worker, case, again.status, CHANGED in again.body))
                if case == "same file again":
                    assert (again.status, again.headers["location"]) == (
                        303,
                        first.headers["location"],
                    )
                else:
                    assert again.status == 409 and CHANGED in again.body, (worker, case)
                    assert f'value="{case}"' in again.body
        idle, locks = nothing_held()
    print("\nre-upload with a used token: (worker, case, status, told it differs)")
    for line in told:
        print(" ", line)
    assert len(letters(sessions)) == 2 * len(RESENT) and (idle, locks) == (0, 0)


def test_storms_of_the_last_step_sign_up_once_a_flow(
    redis_url, database_url, sessions, rdb, nothing_held
):
    statuses: Counter[int] = Counter()
    with gunicorn("letters", redis_url, database_url) as port:
        for round in range(ROUNDS):
            browser = Browser(port)
            first = hidden(browser.send("GET", "/signup/steps").body)
            details = {**first, "email": f"ada{round}@example.com", "name": "Ada"}
            seats = browser.send("POST", "/signup/steps/seats", details)
            assert seats.status == 200
            confirm = {**hidden(seats.body), "quantity": "2"}
            assert confirm["form_token"] == first["form_token"]
            answers = browser.storm("/signup/steps/confirm", [confirm] * DUPLICATES)
            statuses += tally(answers)
            assert len({(a.status, a.headers.get("location")) for a in answers}) == 1
        idle, locks = nothing_held()
    with sessions() as db:
        rows = db.scalar(select(func.count()).select_from(Signup))
    report("several steps, last step", statuses, rows, f"signups {rows}", idle)
    assert statuses == {303: ROUNDS * DUPLICATES} and rows == ROUNDS
    assert (idle, locks) == (0, 0)


@pytest.fixture
def patient_tables(engine: Engine) -> Iterator[Engine]:
    """The edits app's tables, with one patient at version 1."""
    edits_app.Base.metadata.drop_all(engine)
    edits_app.Base.metadata.create_all(engine)
    with sessionmaker(engine)() as db:
        db.add(edits_app.Patient(name="Ada", address="1 Old Road"))
        db.commit()
    yield engine
    edits_app.Base.metadata.drop_all(engine)


def test_storms_of_two_tabs_edits_bump_the_version_once_and_tell_the_stale_tab(
    redis_url, database_url, patient_tables, rdb, nothing_held
):
    """Each round two tabs are drawn at the same version and each sends its own edit ten
    times, all twenty at once: one edit lands (its tab's ten answers 303), the other
    tab's ten are told it changed since they opened it (409), the version moves by one."""
    statuses: Counter[int] = Counter()
    with gunicorn("edits", redis_url, database_url) as port:
        for round in range(ROUNDS):
            browser = Browser(port)
            tabs = [
                {
                    **hidden(browser.send("GET", "/patients/1").body),
                    "address": f"{round} {side} Street",
                }
                for side in ("Left", "Right")
            ]
            assert tabs[0]["submit_once_version"] == str(round + 1)
            answers = browser.storm("/patients/1/address", [tabs[0], tabs[1]] * (DUPLICATES // 2))
            statuses += tally(answers)
            by_tab = [{a.status for a in answers[side::2]} for side in (0, 1)]
            assert sorted(by_tab, key=sorted) == [{303}, {409}], by_tab
            # every repeat of the stale tab told so, none that the form expired
            assert all(STALE in a.body for a in answers if a.status == 409)
        idle, locks = nothing_held()
    with sessionmaker(patient_tables)() as db:
        version = db.scalar(select(edits_app.Patient.version))
        changes = db.scalar(select(func.count()).select_from(edits_app.AddressChange))
    report("edit, two tabs", statuses, changes, f"version 1 -> {version}", idle)
    assert version == 1 + ROUNDS and changes == ROUNDS
    assert statuses == {303: ROUNDS * DUPLICATES // 2, 409: ROUNDS * DUPLICATES // 2}
    assert (idle, locks) == (0, 0)
