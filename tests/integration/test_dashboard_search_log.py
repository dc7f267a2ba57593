"""The dashboard's search, a task's log and Retry, in a real browser (headless Chromium) against the gateway of
a system left running as a background one (``start_here``, as in test_dashboard.py) (issue 31): the text box
asks the server, so a task on another page is found and the count says matches; the task page shows the task's
log as it grows; Retry is offered only while the task has attempts left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from tests.support.cli import make, start_here, stop_and_check
from tests.integration.test_dashboard import Dashboard, browser, login
from tests.integration.test_dashboard_views import wide
from tests.integration.test_http_gateway import _wait_up

pytestmark = pytest.mark.integration
__all__ = ["browser", "wide"]  # fixtures shared with the other dashboard modules

SLOW_MS = 60_000  # a task's whole run, replans included, on a loaded machine


@pytest.fixture(scope="module")
def dashboard(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A system needing approval (a submitted task stays a draft: a page of them costs no run), two attempts
    per task, no retry back-off; its gateway on a free port; stopped afterwards."""
    http_port = procs.free_port()
    pegasus = make(tmp_path_factory.mktemp("search"), "search", PEGASUS_RUNTIME__APPROVAL_POLICY="manual",
                    PEGASUS_HTTP__ENABLED="true", PEGASUS_HTTP__PORT=str(http_port),
                    PEGASUS_COGNITION__LATENCY_MS="150", PEGASUS_RETRY__MAX_ATTEMPTS="2",
                    PEGASUS_RETRY__BACKOFF_S="0")
    try:
        start_here(pegasus)
        _wait_up(f"http://127.0.0.1:{http_port}")
        pegasus.track()
        dashboard = Dashboard(pegasus, http_port)
        try:
            yield dashboard
        finally:
            dashboard.close()
    finally:
        stop_and_check(pegasus)


def rows(page: Any) -> list[str]:
    return list(page.eval_on_selector_all("#task-rows tr.task-row", "rows => rows.map(r => r.dataset.task)"))


def test_the_text_box_searches_every_page_on_the_server(dashboard: Dashboard, wide: Any, tmp_path: Path) -> None:
    """The oldest of 27 tasks is not on the first page; typing one of its words finds it ("1 match"); a word
    of the 26 others pages through their matches with the cursor."""
    listed = tmp_path / "tasks.txt"
    listed.write_text("\n".join(["find the zebra"] + [f"echo filler {n}" for n in range(26)]) + "\n")
    needle = dashboard.client.submit_many(listed.read_text().splitlines())[0]["task_id"]
    login(wide, dashboard, "read")
    wide.wait_for_function("() => document.querySelectorAll('#task-rows tr.task-row').length === 25")
    assert needle not in rows(wide)
    wide.fill("#text-filter", "zebra")
    wide.wait_for_selector(f'tr[data-task="{needle}"]')
    wide.wait_for_function("() => document.getElementById('page-info').textContent === '1 match, page 1'")
    assert rows(wide) == [needle]
    wide.fill("#text-filter", "filler")
    wide.wait_for_function("() => document.getElementById('page-info').textContent === '26 matches, page 1'")
    wide.click("#next")
    wide.wait_for_function("() => document.getElementById('page-info').textContent === '26 matches, page 2'")
    wide.wait_for_function("() => document.querySelectorAll('#task-rows tr.task-row').length === 1")
    assert needle not in rows(wide)


def test_the_task_page_shows_its_log_as_it_grows(dashboard: Dashboard, wide: Any) -> None:
    """Opened while the task is a draft, the page's log gets its run (transitions, the tool's output, the
    end) with no reload."""
    task_id = dashboard.submit("echo logged-line")
    login(wide, dashboard, "read")
    wide.goto(f"{dashboard.url}/#/task/{task_id}")
    wide.wait_for_selector('#log-entries li[data-kind="transition"]')
    assert "logged-line" not in wide.inner_text("#log-entries")
    dashboard.client.approve(task_id)
    wide.wait_for_selector('#log-entries li[data-kind="tool"] >> text=logged-line', timeout=SLOW_MS)
    wide.wait_for_selector('#log-entries li[data-kind="transition"] >> text=\u2192 done', timeout=SLOW_MS)
    ids = [int(i) for i in wide.eval_on_selector_all("#log-entries li", "els => els.map(e => e.dataset.id)")]
    assert ids == sorted(ids)  # in order, nothing read twice but a transition's own tool output
    assert len(wide.eval_on_selector_all('#log-entries li[data-kind="transition"]', "els => els")) == len(
        {e["id"] for e in dashboard.client.logs(task_id)["entries"] if e["kind"] == "transition"})


def test_retry_is_offered_only_while_attempts_are_left(dashboard: Dashboard, wide: Any, tmp_path: Path) -> None:
    """A failed task with one of its two attempts used: Retry offered, clicked; failed again, it has none
    left: no Retry, the page says so."""
    task_id = dashboard.submit(f"read {tmp_path}/missing.txt")
    dashboard.client.approve(task_id)
    assert dashboard.wait_for(task_id, {"done", "failed", "canceled"})["lifecycle_state"] == "failed"
    login(wide, dashboard, "admin")
    # The page's first stream of the task's events is answered by the gateway before the click (the task is
    # over: its transitions, then end) and given to the page only after the retry's answer: the page must
    # still follow the retried run (a stream that ends late once left it showing the run as queued).
    held: list[Any] = []
    wide.route("**/events", lambda route: route.continue_() if held else held.append(route))
    wide.goto(f"{dashboard.url}/#/task/{task_id}")
    wide.wait_for_selector("#retry")
    assert wide.inner_text('dd[data-field="attempts"]') == "1 of 2"
    while not held:  # the page asks for its stream once it has drawn the task
        wide.wait_for_timeout(50)
    ended = held[0].fetch()
    wide.click("#retry")
    wide.wait_for_selector("#retry", state="detached")  # the page has the retry's answer and has drawn it
    held[0].fulfill(response=ended)
    wide.wait_for_selector("#no-retry >> text=no retry left: 2 of 2 attempts used", timeout=SLOW_MS)
    assert wide.locator("#retry").count() == 0
    assert dashboard.status(task_id)["lifecycle_state"] == "failed"
