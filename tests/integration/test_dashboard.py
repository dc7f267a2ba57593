"""The web dashboard in a real browser (headless Chromium, tests/support/browser.py) against the real
gateway of a real system left running as a background one (``start_here``: forked from the test, without the
``pegasus start`` and launcher that tests/integration/test_cli_background.py tests): tasks appear live without
a reload, a task's page lights the state the system reports, the Approve button runs a waiting task, and
a read-only token is shown no button. Screenshots go to the test's tmp dir (docs/dashboard.md says how
one becomes docs/dashboard.png).
"""

from __future__ import annotations

import sqlite3

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.runtime import procs
from tests.support.cli import Pegasus, as_shown, make, start_here, stop_and_check, waited
from tests.integration.test_http_gateway import _wait_up
from tests.support.browser import chromium

pytestmark = pytest.mark.integration

WAIT_MS = 20_000  # the longest a page may take to show what a test expects (a loaded machine: seconds)


class Dashboard:
    """A background system with its HTTP gateway, tokens of each scope, and a client of the system: the tests
    set up and check what the page shows through it (the command line is tests/integration/test_cli_*.py's
    to test; a command each time would be an interpreter's start).  ``close`` before the system stops."""

    def __init__(self, pegasus: Pegasus, http_port: int) -> None:
        self.cli, self.url = pegasus, f"http://127.0.0.1:{http_port}"
        self.client = pegasus.client()
        self.tokens: dict[str, str] = {}

    def token(self, scope: str) -> str:
        if scope not in self.tokens:
            self.tokens[scope] = self.client.token_create(f"dash-{scope}", scope)["token"]
        return self.tokens[scope]

    def submit(self, text: str) -> str:
        return str(self.client.submit(text)["task_id"])

    def status(self, task_id: str) -> dict[str, Any]:
        """The task as ``pegasus status --json`` shows it."""
        return dict(as_shown(self.client.get(task_id)))

    def wait_for(self, task_id: str, states: set[str]) -> dict[str, Any]:
        return waited(self.client, task_id, states)

    def close(self) -> None:
        self.client.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:  # skips, saying why, where no browser can run
        yield launched


@pytest.fixture(scope="module")
def dashboard(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A system needing approval, stages ~150 ms, its gateway on a free port; stopped afterwards. One for the
    module's tests (starting one takes seconds): each test submits and looks at its own tasks.  It asks for
    the browser first, so without one the tests skip before any system starts."""
    http_port = procs.free_port()
    pegasus = make(tmp_path_factory.mktemp("dashboard"), "dash", PEGASUS_RUNTIME__APPROVAL_POLICY="manual", PEGASUS_HTTP__ENABLED="true",
                    PEGASUS_HTTP__PORT=str(http_port), PEGASUS_COGNITION__LATENCY_MS="150",
                    # traced, to a receiver that is not there: the page shows the trace id, nothing slows down
                    PEGASUS_TELEMETRY__ENABLED="true",
                    PEGASUS_TELEMETRY__ENDPOINT=f"http://127.0.0.1:{procs.free_port()}/v1/traces")
    try:
        start_here(pegasus)
        _wait_up(f"http://127.0.0.1:{http_port}")
        pegasus.track()
        # `pegasus dashboard` gives the page's address (the one command of docs/dashboard.md)
        assert pegasus.json("dashboard", "--no-open") == {"url": f"http://127.0.0.1:{http_port}/"}
        dashboard = Dashboard(pegasus, http_port)
        try:
            yield dashboard
        finally:
            dashboard.close()
    finally:
        stop_and_check(pegasus)


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page raised: {errors}"


def login(page: Any, dashboard: Dashboard, scope: str) -> None:
    page.goto(dashboard.url + "/")
    page.fill("#token", dashboard.token(scope))
    page.click("#login button[type=submit]")
    try:
        page.wait_for_selector("#tasks")
    except Exception:
        raise AssertionError(f"no task table after login; the page says: {page.inner_text('body')[:500]!r}") from None
    assert dashboard.tokens[scope] not in page.url  # the token is never in an address


def lit_state(page: Any, kind: str) -> str:
    """The state a task page's diagram lights as current."""
    return str(page.get_attribute(f'svg[data-kind="{kind}"] g.state.current', "data-state"))


def test_tasks_appear_live_and_a_task_page_lights_the_state_status_reports(
        dashboard: Dashboard, page: Any, tmp_path: Path) -> None:
    """Tasks submitted while the page is open appear without a reload; the task page's diagrams light
    the lifecycle and cognitive states the system reports, and a finished one its path."""
    login(page, dashboard, "admin")
    page.evaluate("window.notReloaded = true")
    first, second = dashboard.submit("what is 2 + 3 * 4?"), dashboard.submit("echo hello")
    for task_id in (first, second):
        page.wait_for_selector(f'tr[data-task="{task_id}"] td.lifecycle >> text=draft')
    assert page.evaluate("window.notReloaded") is True
    dashboard.client.approve(first)
    page.wait_for_selector(f'tr[data-task="{first}"] td.lifecycle >> text=done')  # live, over SSE
    assert page.evaluate("window.notReloaded") is True
    page.screenshot(path=str(tmp_path / "dashboard-tasks.png"), full_page=True)

    for task_id in (first, second):
        page.click(f'tr[data-task="{task_id}"] a')
        page.wait_for_selector('svg[data-kind="cognitive"] g.state.current')
        status = dashboard.status(task_id)
        assert lit_state(page, "cognitive") == status["state"]
        assert lit_state(page, "lifecycle") == status["lifecycle_state"]
        page.screenshot(path=str(tmp_path / f"dashboard-task-{status['lifecycle_state']}.png"), full_page=True)
        page.go_back()
        page.wait_for_selector("#tasks")
    # The finished task's page: the path it took is lit, and its stages are drawn by worker.
    page.click(f'tr[data-task="{first}"] a')
    page.wait_for_selector('svg[data-kind="cognitive"] g.edge.taken')
    taken = page.eval_on_selector_all('svg[data-kind="cognitive"] g.edge.taken',
                                      "edges => edges.map(e => e.dataset.from + '>' + e.dataset.to)")
    assert {"idle>perceiving", "planning>acting", "reflecting>completed"} <= set(taken), taken
    assert page.locator("svg.gantt g.stage").count() == len(dashboard.status(first)["stages"])


def test_approve_with_the_button_and_see_the_task_run(dashboard: Dashboard, page: Any, tmp_path: Path) -> None:
    """A task waiting for approval is approved with the page's button and runs to done, shown live."""
    task_id = dashboard.submit("what is 2 + 3 * 4?")
    login(page, dashboard, "admin")
    page.click(f'tr[data-task="{task_id}"] a')
    page.wait_for_selector("#approve")
    assert lit_state(page, "lifecycle") == "draft"
    page.click("#approve")
    page.wait_for_selector('dd[data-field="lifecycle"] >> text=done')
    assert dashboard.status(task_id)["lifecycle_state"] == "done"
    assert lit_state(page, "lifecycle") == "done" and lit_state(page, "cognitive") == "completed"
    assert page.locator("#approve").count() == 0  # nothing to approve any more
    assert page.inner_text('dd[data-field="trace"]') == dashboard.status(task_id)["trace_id"]
    page.screenshot(path=str(tmp_path / "dashboard-approved.png"), full_page=True)


def test_resume_with_a_message_suspend_and_cancel_with_the_buttons(dashboard: Dashboard, page: Any) -> None:
    """A task waiting for information is resumed with the message typed on its page and finishes with it; a
    running task is suspended, then canceled, with the buttons."""
    # it sleeps longer than a loaded machine takes to press Suspend (a 5 s one ended first at a load of 30-40)
    asking, sleeping = dashboard.submit("help me"), dashboard.submit("sleep 60")
    dashboard.client.approve(asking)
    assert dashboard.wait_for(asking, {"blocked", "done", "failed"})["lifecycle_state"] == "blocked"
    login(page, dashboard, "admin")
    page.click(f'tr[data-task="{asking}"] a')
    page.wait_for_selector('dd[data-field="question"]')
    page.fill("#resume-message", "what is 6*7?")
    page.click("#resume")
    page.wait_for_selector('dd[data-field="lifecycle"] >> text=done')
    assert "42" in str(dashboard.status(asking)["result"])

    dashboard.client.approve(sleeping)
    page.goto(f"{dashboard.url}/#/task/{sleeping}")
    page.click("#suspend")
    page.wait_for_selector('dd[data-field="lifecycle"] >> text=blocked')
    assert lit_state(page, "cognitive") == "suspended"
    page.click("#cancel")
    page.wait_for_selector('dd[data-field="lifecycle"] >> text=canceled')
    assert dashboard.status(sleeping)["lifecycle_state"] == "canceled"
    assert page.locator("#actions button").count() == 0  # nothing more to do to a canceled task


def test_filters_by_state_and_text_and_pages(dashboard: Dashboard, page: Any, tmp_path: Path) -> None:
    """Thirty new drafts fill more than a page: older ones are on the next; the text box asks the gateway's
    search; the state filter asks the gateway for that state only (a done task older than the drafts comes to
    the first page), and hides what it excludes before the answer comes."""
    finished = dashboard.submit("echo filtered done")
    dashboard.client.approve(finished)
    assert dashboard.wait_for(finished, {"done", "failed", "canceled"})["lifecycle_state"] == "done"
    submitted = dashboard.client.submit_many([f"echo paged {n:02d}" for n in range(30)])
    newest_first = [row["task_id"] for row in reversed(submitted)]
    login(page, dashboard, "read")
    rows = page.locator("#task-rows tr.task-row")
    page.wait_for_selector(f'tr[data-task="{newest_first[0]}"]')
    assert rows.count() == 25
    page.click("#next")
    page.wait_for_selector(f'tr[data-task="{newest_first[25]}"]')
    assert page.locator(f'tr[data-task="{newest_first[0]}"]').count() == 0
    page.click("#prev")
    page.wait_for_selector(f'tr[data-task="{newest_first[0]}"]')
    page.fill("#text-filter", "paged 07")
    page.wait_for_function("() => document.querySelectorAll('#task-rows tr.task-row').length === 1")
    assert page.get_attribute("#task-rows tr.task-row", "data-task") == newest_first[29 - 7]
    # The gateway's answers to the done filter are held back: the draft shown must go before they come.
    held: list[Any] = []
    holding = [True]

    def hold_done(route: Any) -> None:
        if holding[0] and "state=done" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    page.route("**/v1/tasks?*", hold_done)
    page.fill("#text-filter", "")
    page.select_option("#state-filter", "done")
    assert page.locator("#task-rows tr.task-row").count() == 0
    holding[0] = False
    for route in held:
        route.continue_()
    page.wait_for_selector(f'tr[data-task="{finished}"]')  # the last answer: no text, done only
    assert all(text == "done" for text in page.locator("#task-rows td.lifecycle").all_inner_texts())


def test_schedules_pause_with_the_button_and_webhooks_are_listed(dashboard: Dashboard, page: Any) -> None:
    """A schedule shows its next fire time and is paused with its button (as the system's list then
    says); the webhooks are listed, never their secrets."""
    dashboard.client.schedule_add("hourly", every="1h", text="tidy up")
    dashboard.client.webhook_add("gh", "Review {pull_request.title}")
    page.clock.install()  # the page's timers run as ever, and the test can bring its next redraw forward
    login(page, dashboard, "admin")
    page.click('#nav a[data-page="schedules"]')
    row = 'tr[data-schedule="hourly"]'
    page.wait_for_selector(f"{row} >> text=active")
    assert page.inner_text(f"{row} td:nth-child(4)").startswith("20")  # its next fire time
    page.click(f'{row} button[data-action="pause"]')
    page.wait_for_selector(f"{row} >> text=paused")
    assert [s["paused"] for s in dashboard.client.schedules() if s["name"] == "hourly"] == [True]
    page.wait_for_selector('#webhooks >> text="POST /v1/webhooks/gh"')
    # A schedule a bug wrote into the store (a field no version knows) shows quarantined with its error.
    with sqlite3.connect(dashboard.cli.home / "pegasus.db") as db:
        db.execute("INSERT INTO schedules (name, id, spec, paused, cursor, fired, skipped, created_at) VALUES "
                   "('odd', 'id-odd', '{\"colour\": \"red\"}', 0, 0, 0, 0, 'then')")
    bad = 'tr[data-schedule="odd"]'
    page.clock.fast_forward(5000)  # the page's redraw (every 5 s) now, not up to 5 s from now
    page.wait_for_selector(f"{bad} >> text=quarantined")
    assert "unreadable" in page.inner_text(f"{bad} td.quarantine") and page.locator(f"{bad} button").count() == 0


def test_a_quarantined_message_shows_on_its_tasks_page_with_its_error(dashboard: Dashboard, page: Any) -> None:
    """A stored message set aside at a start (tests/integration/test_quarantine.py makes one): its number and
    error on the task's page, in red."""
    task_id = dashboard.submit("echo waits for approval")
    with sqlite3.connect(dashboard.cli.home / "pegasus.db") as db:
        db.execute("INSERT INTO task_messages (task_id, seq, text, created_at, quarantined) VALUES (?, 1, 'x', "
                   "'then', 'quarantined: ValueError: message 1 is stored as blob, not text')", (task_id,))
    login(page, dashboard, "read")
    page.goto(f"{dashboard.url}/#/task/{task_id}")
    page.wait_for_selector('dd[data-field="message 1"] span.quarantine >> text=stored as blob')


def test_the_submit_form_sends_a_tier_and_shows_a_refused_one(dashboard: Dashboard, page: Any) -> None:
    """The form's tier goes in the body of POST /v1/tasks: an unknown one's refusal, naming the tiers, is shown;
    a known one is the task's, on its page and in the task's record."""
    login(page, dashboard, "submit")
    page.fill("#submit-text", "echo tier form")
    page.fill("#submit-tier", "huge")
    page.click("#submit button[type=submit]")
    page.wait_for_selector("#submit-error >> text=unknown tier 'huge'; the tiers are default")
    page.fill("#submit-tier", "default")
    page.click("#submit button[type=submit]")
    page.wait_for_selector("#task-rows td >> text=echo tier form")  # made: the list shows it, live
    [task] = dashboard.client.list(text="tier form")
    assert dashboard.status(task["task_id"])["tier"] == "default"
    page.goto(f"{dashboard.url}/#/task/{task['task_id']}")
    page.wait_for_selector('dd[data-field="tier"] >> text=default')


def test_a_read_only_token_sees_no_buttons(dashboard: Dashboard, page: Any, tmp_path: Path) -> None:
    """With a read token the page offers no action and no submit form; the data is all there."""
    task_id = dashboard.submit("echo waiting")
    login(page, dashboard, "read")
    assert page.locator("#submit").count() == 0
    page.click(f'tr[data-task="{task_id}"] a')
    page.wait_for_selector('svg[data-kind="lifecycle"] g.state.current')
    assert lit_state(page, "lifecycle") == "draft"
    assert page.locator("#actions").count() == 0 and page.locator("button.action").count() == 0
    page.screenshot(path=str(tmp_path / "dashboard-read-only.png"), full_page=True)
    # The pools page shows each worker of both pools.
    page.click('#nav a[data-page="pools"]')
    page.wait_for_selector('.pool[data-pool="llm"]')
    stats = dashboard.client.stats()
    for name, pool in stats["pools"].items():
        assert page.locator(f'.pool[data-pool="{name}"] tbody tr').count() == len(pool["workers"])


def test_a_token_revoked_while_its_page_is_open_is_sent_back_to_the_login_saying_why(
        dashboard: Dashboard, page: Any) -> None:
    """The next request is refused (401): the page forgets the token and shows the login form with the reason."""
    made = dashboard.client.token_create("dash-revoked", "read")
    page.goto(dashboard.url + "/")
    page.fill("#token", made["token"])
    page.click("#login button[type=submit]")
    page.wait_for_selector("#tasks")
    dashboard.client.token_revoke("dash-revoked")
    # To the next page as its link does, without a click: the page's own refresh may meet the 401 first and hide
    # the nav (the click then waited 20 s for a link no longer shown).
    page.evaluate("location.hash = '#/pools'")
    page.wait_for_selector("#login")
    assert page.inner_text("#login-error") == "The token was refused: log in again."
    assert page.evaluate("sessionStorage.getItem('pegasus.token')") is None


def test_the_routes_the_dashboard_adds_are_under_the_gateways_tokens(dashboard: Dashboard) -> None:
    """/v1/token names the token's scope; /v1/events streams every task's transitions; a task's context and
    the diagrams need a token like every /v1 route; the page itself does not (its login form)."""
    read = {"Authorization": f"Bearer {dashboard.token('read')}"}
    for path in ("/v1/token", "/v1/events", "/v1/tasks/x/context", "/v1/webhooks", "/dashboard/machines/classic.svg"):
        refused = httpx.get(dashboard.url + path, timeout=10)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized", path
    assert httpx.get(dashboard.url + "/", timeout=10).status_code == 200
    assert httpx.get(dashboard.url + "/v1/token", headers=read, timeout=10).json() == {"name": "dash-read",
                                                                                       "scope": "read"}
    missing = httpx.get(dashboard.url + "/v1/tasks/no-such-task/context", headers=read, timeout=10)
    assert missing.status_code == 404 and "no-such-task" in missing.json()["error"]["message"]
    assert httpx.get(dashboard.url + "/dashboard/machines/classic.svg", headers=read, timeout=10).status_code == 200
    with httpx.stream("GET", dashboard.url + "/v1/events", headers=read, timeout=30) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.iter_lines()
        assert next(lines).startswith(":")  # the stream is open (and subscribed) before anything is submitted
        task_id = dashboard.submit("echo streamed")
        for line in lines:
            if line.startswith("data:") and task_id in line:
                assert '"to_state":"draft"' in line and '"machine":"lifecycle"' in line
                break


def test_pegasus_dashboard_says_how_to_start_the_gateway_when_none_answers(tmp_path: Path) -> None:
    """With no gateway, ``pegasus dashboard`` exits 1 with one line saying how to start one (and opens nothing)."""
    result = make(tmp_path, "nogateway")("dashboard", "--no-open")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("pegasus: no HTTP gateway answers at http://127.0.0.1:")
    assert "pegasus start --http PORT" in result.stderr and len(result.stderr.splitlines()) == 1
