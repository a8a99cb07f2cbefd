"""The library's example apps (flask-submit-once/examples/) in headless Chromium, each
served by gunicorn on 127.0.0.1 over the suite's Redis and PostgreSQL: the same sign-up
form sent as a plain POST, by htmx 2 (redirected, and a second form answered in place),
under Turbo Drive and by the fetch guide's own script takes effect once, and a changed
resubmit is told.

Each test checks what the user sees, the status codes the browser received, how many
POSTs the server read, and the rows in PostgreSQL; the figures are in the messages.
No page may break its Content-Security-Policy (the examples send a strict one).
"""

from __future__ import annotations

import importlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, Route, expect
from sqlalchemy import MetaData, text

from tests.conftest import Servers
from tests.support.live import LiveServer

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "flask-submit-once"
EXAMPLES = LIBRARY / "examples"
THANKS_URL = re.compile(r"/thanks/[\w-]{22}$")
#: gunicorn's debug line for a POST of a form, logged when the request is read.
FORM_POST = re.compile(r"\[DEBUG\] POST /(subscribe|signup|questions|referrals)$", re.MULTILINE)
ADA, GRACE = "ada@example.com", "grace@example.com"
#: The button and the confirmation's heading of each example.
SUBMIT = {
    "newsletter": "Subscribe",
    "htmx_signup": "Sign up",
    "turbo_signup": "Sign up",
    "referral_letter": "Send the referral",
}
DONE = {
    "newsletter": "You are subscribed",
    "htmx_signup": "You are on the list",
    "turbo_signup": "You are on the list",
}
#: The table of each example's sign-ups.
SIGNUPS = {
    "newsletter": "newsletter_subscriptions",
    "htmx_signup": "htmx_signups",
    "turbo_signup": "turbo_signups",
}


def example(name: str):
    """The example's module, imported as its folder runs it (``newsletter.app``)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(f"{name}.app")


def metadata_of(module) -> MetaData:
    """The example's tables: a declarative Base's, or Flask-SQLAlchemy's ``db``'s."""
    return module.Base.metadata if hasattr(module, "Base") else module.db.metadata


class ExampleServer(LiveServer):
    """gunicorn serving ``<name>.app:create_app()`` from the examples folder (2 workers,
    so that repeats meet another process too), logging each request as it is read."""

    ready_path = "/"

    def __init__(self, servers: Servers, name: str) -> None:
        super().__init__(servers, workers=2, threads=8)
        self.args[-1:] = [
            "--pythonpath",
            str(EXAMPLES),
            "--log-level",
            "debug",
            f"{name}.app:create_app()",
        ]
        self.name, self.servers = name, servers
        self.metadata = metadata_of(example(name))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def __enter__(self) -> ExampleServer:
        # once, not raced by two workers
        self.metadata.create_all(self.servers.engine)
        super().__enter__()
        return self

    def posts_received(self) -> int:
        """POSTs of the form the server has read so far (before the app ran)."""
        return len(FORM_POST.findall(self.output()))

    def posts_since(self, mark: int, *, at_least: int, timeout: float = 10) -> int:
        deadline = time.monotonic() + timeout
        while (count := self.posts_received() - mark) < at_least and time.monotonic() < deadline:
            time.sleep(0.05)
        return count

    def emails(self) -> list[str]:
        """The sign-ups in PostgreSQL, oldest first."""
        return self.column(SIGNUPS[self.name], "email")

    def column(self, table: str, column: str) -> list[str]:
        with self.servers.engine.connect() as conn:
            return list(conn.scalars(text(f"SELECT {column} FROM {table} ORDER BY id")))

    def cleared(self) -> ExampleServer:
        # another test may have dropped them
        self.metadata.create_all(self.servers.engine)
        names = ", ".join(table.name for table in self.metadata.sorted_tables)
        with self.servers.engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY"))
        return self


@pytest.fixture(scope="session")
def example_servers(servers: Servers) -> Iterator[Callable[[str], ExampleServer]]:
    """``start(name)``: the example's server, started on first use, for the session."""
    running: dict[str, ExampleServer] = {}
    with ExitStack() as stack:

        def start(name: str) -> ExampleServer:
            if name not in running:
                running[name] = stack.enter_context(ExampleServer(servers, name))
            return running[name]

        yield start
    for server in running.values():
        server.metadata.drop_all(servers.engine)


@pytest.fixture
def serve(example_servers) -> Iterator[Callable[[str], ExampleServer]]:
    """``serve(name)``: the example's server with no sign-ups, and no table of its left
    after the test (its next test makes it again)."""
    used: list[ExampleServer] = []

    def start(name: str) -> ExampleServer:
        used.append(example_servers(name).cleared())
        return used[-1]

    yield start
    # the table goes too: the shop's schema test sees only the shop's
    for server in used:
        server.metadata.drop_all(server.servers.engine)


@pytest.fixture
def page(new_page) -> Iterator[Page]:
    """A page whose Content-Security-Policy violations fail the test."""
    page = new_page()
    blocked: list[str] = []
    page.on(
        "console",
        lambda message: (
            blocked.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    assert blocked == [], f"the page broke its CSP: {blocked}"


def open_form(page: Page, server: ExampleServer) -> str:
    """Open the example's form; the token it was rendered with."""
    page.goto(server.url)
    expect(page.get_by_role("button", name=SUBMIT[server.name])).to_be_visible()
    return token_on(page)


def token_on(page: Page, form: int = 0) -> str:
    return page.locator("form").nth(form).locator("input[name=form_token]").input_value()


def submit(page: Page, server: ExampleServer, email: str) -> int:
    """Type ``email`` and click the button; the status of the POST's answer."""
    page.get_by_label("Email").fill(email)
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name=SUBMIT[server.name]).click()
    return answer.value.status


def expect_confirmation(page: Page, server: ExampleServer, email: str) -> str:
    """The user is looking at the confirmation of ``email``'s sign-up; its address."""
    expect(page).to_have_url(THANKS_URL)
    expect(page.get_by_role("heading", level=1)).to_have_text(DONE[server.name])
    expect(page.get_by_text(email)).to_be_visible()
    return page.url.removeprefix(server.url[:-1])


def click_twice(page: Page, button: Locator, *, gap_ms: int = 20) -> None:
    """Two real mouse clicks ``gap_ms`` apart (Chromium merges two in one task)."""
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    page.wait_for_timeout(gap_ms)
    page.mouse.click(x, y)


def post_statuses(page: Page) -> list[int]:
    """The statuses of the POSTs this page gets answers to, as they arrive."""
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status) if r.request.method == "POST" else None)
    return statuses


@pytest.mark.parametrize("comfort", [True, False], ids=["hx-disabled-elt", "comfort-removed"])
def test_htmx_double_click_signs_up_once_and_the_page_lands_on_one_confirmation(
    page, serve, comfort
):
    server = serve("htmx_signup")
    open_form(page, server)
    # what the server alone guarantees: htmx then sends the second click too
    if not comfort:
        page.locator("form").first.evaluate("form => form.removeAttribute('hx-disabled-elt')")
    page.get_by_label("Email").fill(ADA)
    statuses = post_statuses(page)
    mark = server.posts_received()
    held: list[Route] = []
    if not comfort:
        # htmx queues the second click's POST until the first is answered, then sends it
        # in the same task that follows HX-Redirect; on a loaded machine the page could
        # leave before that POST is read, and the test would prove nothing about two
        # sends of one token. The way to the confirmation waits until both are read.
        page.route(THANKS_URL, lambda route: held.append(route))
    click_twice(page, page.get_by_role("button", name="Sign up"))
    if not comfort:
        for _ in range(500):
            if server.posts_received() - mark >= 2 and len(statuses) >= 2:
                break
            page.wait_for_timeout(20)
        for route in held:
            route.continue_()
        page.unroute(THANKS_URL)
    landed = expect_confirmation(page, server, ADA)
    posts = server.posts_since(mark, at_least=1 if comfort else 2)
    # a second HX-Redirect would move the page again
    page.wait_for_timeout(300)
    figures = f"{posts} POSTs read, answers {statuses}, rows {server.emails()}, at {landed}"
    assert server.emails() == [ADA], figures
    assert posts == (1 if comfort else 2), figures
    assert page.url.endswith(landed) and set(statuses) == {200}, figures


@pytest.mark.parametrize("name", ["htmx_signup", "turbo_signup"])
def test_a_typo_is_shown_again_with_the_input_and_the_same_token(page, serve, name):
    server = serve(name)
    token = open_form(page, server)
    page.locator("h1").evaluate("h1 => h1.dataset.marker = 'this page'")
    # the browser lets it pass; the server not
    status = submit(page, server, "ada@example")
    expect(page.get_by_text("Invalid email address.")).to_be_visible()
    expect(page.get_by_label("Email")).to_have_value("ada@example")
    # htmx swapped the form alone
    kept = page.locator("h1[data-marker]").count()
    figures = f"status {status}, page kept {kept}, rows {server.emails()}"
    assert status == 422 and token_on(page) == token and server.emails() == [], figures
    # Turbo renders the page
    assert kept == (1 if name == "htmx_signup" else 0), figures
    assert submit(page, server, ADA) in (200, 303)
    expect_confirmation(page, server, ADA)
    assert server.emails() == [ADA]


@pytest.mark.parametrize("name", ["newsletter", "htmx_signup"])
def test_back_edit_resubmit_is_told_with_the_new_input_and_places_nothing(page, serve, name):
    server = serve(name)
    token = open_form(page, server)
    placed = submit(page, server, ADA)
    first = expect_confirmation(page, server, ADA)
    # the browser's cached copy: the spent token, the input as typed
    page.go_back()
    expect(page.get_by_label("Email")).to_have_value(ADA)
    assert token_on(page) == token, "Back fetched a fresh form: its submit would sign up twice"
    mark = server.posts_received()
    told = submit(page, server, GRACE)
    expect(page.get_by_role("alert")).to_contain_text("already used, with other details")
    expect(page.get_by_label("Email")).to_have_value(GRACE)
    link = page.get_by_role("link", name="The sign-up you sent first")
    expect(link).to_have_attribute("href", first)
    posts = server.posts_since(mark, at_least=1)
    figures = f"answers {placed} then {told}, {posts} POST, rows {server.emails()}"
    assert told == 409 and posts == 1 and server.emails() == [ADA], figures
    assert token_on(page) not in ("", token), "the form told must carry a fresh token"
    link.click()
    assert expect_confirmation(page, server, ADA) == first


def test_turbo_back_after_a_submit_fetches_a_fresh_empty_form_so_its_submit_is_new(page, serve):
    # Turbo 8 drops its snapshot cache after every non-GET submit, so there is no snapshot
    # of the form to go back to: Back fetches the form, with a fresh token and no input.
    server = serve("turbo_signup")
    token = open_form(page, server)
    submit(page, server, ADA)
    first = expect_confirmation(page, server, ADA)
    page.go_back()
    expect(page.get_by_role("button", name="Sign up")).to_be_visible()
    expect(page.get_by_label("Email")).to_have_value("")
    assert token_on(page) not in ("", token), "Back showed a spent token"
    status = submit(page, server, GRACE)
    second = expect_confirmation(page, server, GRACE)
    figures = f"answer {status}, rows {server.emails()}, confirmations {first} {second}"
    assert status == 303 and server.emails() == [ADA, GRACE] and first != second, figures


def test_turbo_renders_the_409_when_a_rendering_whose_answer_was_lost_is_sent_edited(page, serve):
    server = serve("turbo_signup")
    token = open_form(page, server)
    lost: list[int] = []

    def lose_the_first_answer(route: Route) -> None:
        if lost:
            route.continue_()
            return
        # placed on the server
        lost.append(route.fetch(max_redirects=0).status)
        # the answer never arrives
        route.abort("connectionreset")

    page.route("**/signup", lose_the_first_answer)
    page.get_by_label("Email").fill(ADA)
    page.get_by_role("button", name="Sign up").click()
    # Turbo gave up
    expect(page.get_by_role("button", name="Sign up")).to_be_enabled()
    assert lost == [303] and server.emails() == [ADA], f"first answer {lost}"
    # the same rendering, edited
    status = submit(page, server, GRACE)
    expect(page.get_by_role("alert")).to_contain_text("already used, with other details")
    expect(page.get_by_label("Email")).to_have_value(GRACE)
    link = page.get_by_role("link", name="The sign-up you sent first")
    figures = f"answers {lost[0]} (lost) then {status}, rows {server.emails()}"
    assert status == 409 and server.emails() == [ADA], figures
    assert token_on(page) not in ("", token)
    link.click()
    expect_confirmation(page, server, ADA)


def fetch_guide_script() -> str:
    """The script the fetch guide gives (docs/fetch.md's one ``js`` block), as written."""
    (script,) = re.findall(r"```js\n(.*?)```", (LIBRARY / "docs/fetch.md").read_text(), re.S)
    return script


def test_the_fetch_guides_script_double_clicked_signs_up_once_and_lands_on_it(page, serve):
    # a plain form: the guide's script is all the JavaScript
    server = serve("newsletter")
    open_form(page, server)
    page.add_script_tag(content=fetch_guide_script())
    page.get_by_label("Email").fill(ADA)
    answers: list[tuple[int, str]] = []
    page.on(
        "response",
        lambda r: (
            answers.append((r.status, r.headers.get("content-type", "")))
            if r.request.method == "POST"
            else None
        ),
    )
    # Both POSTs are held in the browser until the second is sent, then let go together:
    # on a loaded machine the first answer could otherwise take the page away before the
    # second click, and the test would prove nothing about two sends of one token.
    held: list[Route] = []
    page.route(
        "**/*",
        lambda route: held.append(route) if route.request.method == "POST" else route.continue_(),
    )
    mark = server.posts_received()
    click_twice(page, page.get_by_role("button", name="Subscribe"))
    for _ in range(500):
        if len(held) >= 2:
            break
        page.wait_for_timeout(20)
    assert len(held) == 2, f"the double click sent {len(held)} POSTs"
    for route in held:
        route.continue_()
    page.unroute("**/*")
    expect_confirmation(page, server, ADA)
    posts = server.posts_since(mark, at_least=2)
    figures = f"answers {answers}, {posts} POSTs, rows {server.emails()}"
    assert posts == 2 and server.emails() == [ADA], figures
    # The page leaves for the result with the first answer: the other may never reach it.
    assert answers and {status for status, _ in answers} <= {200, 201}, figures
    assert all(kind.startswith("application/json") for _, kind in answers), figures


def test_the_fetch_guides_script_shows_a_typo_and_keeps_the_token(page, serve):
    server = serve("newsletter")
    token = open_form(page, server)
    page.add_script_tag(content=fetch_guide_script())
    status = submit(page, server, "ada@example")
    expect(page.get_by_role("alert")).to_contain_text("Invalid email address.")
    assert status == 422 and token_on(page) == token and server.emails() == []
    assert submit(page, server, ADA) == 201
    expect_confirmation(page, server, ADA)


# Not strict: the bug shows only when the retry reaches the worker that saw the first land.
def test_htmx_question_whose_answer_was_lost_is_answered_in_place_once(page, serve):
    # htmx drops a second request from a form while the first is in flight, so the repeat
    # an in-place form meets is a retry after a lost answer: the same rendering, sent again.
    server = serve("htmx_signup")
    open_form(page, server)
    first = token_on(page, form=1)
    lost: list[int] = []

    def lose_the_first_answer(route: Route) -> None:
        if lost:
            route.continue_()
            return
        # made on the server
        lost.append(route.fetch().status)
        # the answer never arrives
        route.abort("connectionreset")

    page.route("**/questions", lose_the_first_answer)
    page.get_by_label("Your question").fill("When does it open?")
    page.get_by_role("button", name="Ask").click()
    # htmx gave up
    expect(page.get_by_role("button", name="Ask")).to_be_enabled()
    assert lost == [201] and server.column("htmx_questions", "text") == ["When does it open?"]
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Ask").click()
    expect(page.get_by_role("status")).to_be_visible()
    note = page.get_by_role("status").inner_text()
    figures = f"answers {lost[0]} (lost) then {answer.value.status}, note {note!r}"
    assert answer.value.status == 200 and "When does it open?" in note, figures
    assert server.column("htmx_questions", "text") == ["When does it open?"], figures
    assert token_on(page, form=1) not in ("", first), "the next question needs a fresh token"


def test_htmx_question_answered_in_place_once_with_the_button_disabled(page, serve):
    server = serve("htmx_signup")
    open_form(page, server)
    first = token_on(page, form=1)
    page.get_by_label("Your question").fill("When does it open?")
    mark = server.posts_received()
    click_twice(page, page.get_by_role("button", name="Ask"))
    expect(page.get_by_role("status")).to_contain_text("When does it open?")
    posts = server.posts_since(mark, at_least=1)
    assert posts == 1 and server.column("htmx_questions", "text") == ["When does it open?"]
    assert page.url == server.url and server.emails() == []
    assert token_on(page, form=1) not in ("", first), "the next question needs a fresh token"
    page.get_by_label("Your question").fill("Is it free?")
    page.get_by_role("button", name="Ask").click()
    expect(page.get_by_role("status").last).to_contain_text("Is it free?")
    assert server.column("htmx_questions", "text") == ["When does it open?", "Is it free?"]


@pytest.mark.parametrize("name", list(SUBMIT))
def test_each_example_imports_only_flask_submit_once_of_this_repository(name):
    source = (EXAMPLES / name / "app.py").read_text()
    ours = set(re.findall(r"^(?:from|import) (\w+)", source, re.M)) & {
        "flask_submit_once",
        "submit_once",
        "webapp",
        "dev",
        "tests",
    }
    assert ours == {"flask_submit_once"}


@pytest.mark.parametrize(
    ("name", "asset"),
    [
        ("htmx_signup", "htmx.min.js"),
        ("booking_in_steps", "htmx.min.js"),
        ("referral_letter", "htmx.min.js"),
        ("turbo_signup", "turbo.es2017-umd.js"),
        ("turbo_booking_in_steps", "turbo.es2017-umd.js"),
    ],
)
def test_each_example_carries_the_vendored_copy_of_its_library(name, asset):
    copy = EXAMPLES / name / "static" / asset
    assert copy.read_bytes() == (ROOT / "static/vendor" / asset).read_bytes(), (
        f"{copy.relative_to(ROOT)} is not static/vendor/{asset}: run scripts/vendor-js"
    )
