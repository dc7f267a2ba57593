"""What the dashboard shows, measured in a real browser (headless Chromium, tests/support/browser.py) against the
real gateway of a system left running as a background one (``start_here``, as in test_dashboard.py) (issue 31):
actions offered only where they can succeed and every refusal kept in sight; a parent waiting for its sub-tasks
told apart from a task waiting for a person, and blocked not red like failed; sub-tasks nested under their
parent; diagram labels that never overlap or get cut (their boxes measured in the browser); a Gantt chart that
fits its card at 800 px, draws the stage running now and ticks at 1, 2 or 5 x 10^n; the queue's count agreeing
with its list; capabilities readable; times in the browser's own time zone; a schedule created from the page.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from actors.client import RequestError
from actors.runtime import procs
from tests.support.cli import make, start_here, stop_and_check
from tests.integration.test_dashboard import WAIT_MS, Dashboard, browser, login
from tests.integration.test_http_gateway import _wait_up

pytestmark = pytest.mark.integration
__all__ = ["browser"]  # the module's browser fixture, shared with test_dashboard.py

IST = timedelta(hours=5, minutes=30)  # the browser's time zone in these tests (Asia/Kolkata: no summer time)


@pytest.fixture(scope="module")
def dashboard(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A system approving by itself, stages ~150 ms, a retry waiting 600 s before it queues (a retried task
    stays queued); its gateway on a free port; stopped afterwards."""
    http_port = procs.free_port()
    pegasus = make(tmp_path_factory.mktemp("views"), "views", PEGASUS_HTTP__ENABLED="true",
                    PEGASUS_HTTP__PORT=str(http_port), PEGASUS_COGNITION__LATENCY_MS="150",
                    PEGASUS_RETRY__BACKOFF_S="600", PEGASUS_RETRY__BACKOFF_MAX_S="600")
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


def opened(browser: Any, width: int) -> Any:
    """A page ``width`` px wide whose clock is in Asia/Kolkata (UTC+05:30); errors it raises are kept."""
    context = browser.new_context(viewport={"width": width, "height": 1000}, timezone_id="Asia/Kolkata")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


@pytest.fixture
def wide(browser: Any) -> Iterator[Any]:
    page = opened(browser, 1280)
    yield page
    page.context.close()
    assert not page.errors, f"the page raised: {page.errors}"


@pytest.fixture
def narrow(browser: Any) -> Iterator[Any]:
    page = opened(browser, 800)
    yield page
    page.context.close()
    assert not page.errors, f"the page raised: {page.errors}"


@pytest.fixture(scope="module")
def failed(dashboard: Dashboard, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A task that failed (made once: its replan takes seconds); the queue's test retries it."""
    task_id = dashboard.submit(f"read {tmp_path_factory.mktemp('nothing')}/missing.txt")
    assert dashboard.wait_for(task_id, {"done", "failed", "canceled"})["lifecycle_state"] == "failed"
    return task_id


def cancel(dashboard: Dashboard, task_id: str) -> None:
    """Cancel a task the test left going (one that ended meanwhile refuses: nothing to do)."""
    with contextlib.suppress(RequestError):
        dashboard.client.cancel(task_id)


def mark(page: Any, selector: str) -> None:
    """Mark the element at ``selector``: ``redrawn`` then waits for a new one."""
    page.eval_on_selector(selector, "el => { el.dataset.old = '1'; }")


def redrawn(page: Any, selector: str) -> None:
    """Wait until the element at ``selector`` (marked) is replaced by a new one (the page redrew it)."""
    page.wait_for_function("sel => { const el = document.querySelector(sel); return el && !el.dataset.old; }", arg=selector)


def watch(page: Any, selector: str, text: str) -> None:
    """From now on, note whether a redraw of the task page's fields leaves ``text`` in ``selector``."""
    page.evaluate("""([sel, text]) => { window.shownWhenRedrawn = false;
      new MutationObserver(() => { const el = document.querySelector(sel);
                                   if (el && el.textContent.includes(text)) window.shownWhenRedrawn = true; })
        .observe(document.getElementById('summary'), {childList: true}); }""", [selector, text])


def shown_when_redrawn(page: Any) -> None:
    """Wait for a redraw that left the watched text in sight (an action's answer is followed by one)."""
    page.wait_for_function("() => window.shownWhenRedrawn")


def test_a_parent_waiting_for_sub_tasks_is_not_offered_resume_and_a_refusal_stays_shown(
        dashboard: Dashboard, wide: Any, failed: str) -> None:
    """A parent waiting for its sub-tasks: "waiting for sub-tasks", its children nested under it, no Resume
    nor message box (only Cancel). A task asking a person: "waiting for you", Resume offered; a refused
    resume's error is still shown after the page redrew. Blocked is not coloured as failed."""
    login(wide, dashboard, "admin")  # first: the rows come and change live
    # the parent waits as long as its first child waits for a person: the test's whole length
    parent, asking = dashboard.submit("in parallel: help me; echo nested"), dashboard.submit("help me")
    for task_id in (parent, asking):
        assert dashboard.wait_for(task_id, {"blocked"})["lifecycle_state"] == "blocked"
    assert dashboard.status(parent)["waiting_for"]
    children = dashboard.status(parent)["children"]
    wide.wait_for_selector(f'tr[data-task="{parent}"][data-waiting="children"]')
    wide.wait_for_selector(f'tr[data-task="{asking}"][data-waiting="person"]')
    for child in children:
        wide.wait_for_selector(f'tr[data-task="{child}"][data-parent="{parent}"][data-depth="1"]')
    rows = wide.eval_on_selector_all("#task-rows tr.task-row", "rows => rows.map(r => [r.dataset.task, r.dataset.depth])")
    at = [task for task, _ in rows].index(parent)
    assert {task for task, _ in rows[at + 1: at + 1 + len(children)]} == set(children)  # right under it
    assert all(depth == "1" for _, depth in rows[at + 1: at + 1 + len(children)])
    assert wide.inner_text(f'tr[data-task="{parent}"] td.lifecycle') == "blocked waiting for sub-tasks"
    assert wide.inner_text(f'tr[data-task="{asking}"] td.lifecycle') == "blocked waiting for you"
    colour = "sel => getComputedStyle(document.querySelector(sel)).backgroundColor"
    blocked, failing = (wide.evaluate(colour, f'tr[data-task="{t}"] td.lifecycle .badge.{s}')
                        for t, s in ((asking, "blocked"), (failed, "failed")))
    assert blocked != failing
    assert wide.evaluate(colour, f'tr[data-task="{parent}"] .badge.children') != wide.evaluate(
        colour, f'tr[data-task="{asking}"] .badge.person')

    wide.goto(f"{dashboard.url}/#/task/{parent}")
    wide.wait_for_selector("#waiting-note >> text=it goes on by itself")
    assert wide.locator("#resume").count() == 0 and wide.locator("#resume-message").count() == 0
    assert wide.locator("#cancel").count() == 1
    assert wide.inner_text('dd[data-field="lifecycle"]') == "blocked waiting for sub-tasks"

    wide.goto(f"{dashboard.url}/#/task/{asking}")
    wide.fill("#resume-message", "x" * 70_000)  # over max_input_bytes: the gateway refuses it (400)
    watch(wide, "#action-error", "resume refused")
    wide.click("#resume")
    shown_when_redrawn(wide)  # the redraw after the answer keeps the refusal in sight
    assert "resume refused" in wide.inner_text("#action-error")
    assert dashboard.status(asking)["lifecycle_state"] == "blocked"
    cancel(dashboard, parent)
    cancel(dashboard, asking)


def redrawing(page: Any, task_id: str) -> None:
    """The task's page redraws about every half second: its event stream answers one event and ends, and
    the page connects again (what a busy task's transitions do to it)."""
    page.route(f"**/v1/tasks/{task_id}/events*", lambda route: route.fulfill(
        status=200, headers={"Content-Type": "text/event-stream"}, body="id: 1\nevent: transition\ndata: {}\n\n"))


def test_typing_and_a_press_on_resume_go_on_across_the_pages_redraws(dashboard: Dashboard, wide: Any) -> None:
    """While the page redraws, what a person types keeps going into the resume box (it keeps its focus),
    a press on Resume begun before a redraw and released after it is a click, and the refusal and the
    message it refused stay in sight through the next redraws."""
    asking = dashboard.submit("help me")
    assert dashboard.wait_for(asking, {"blocked"})["lifecycle_state"] == "blocked"
    login(wide, dashboard, "admin")
    redrawing(wide, asking)
    wide.goto(f"{dashboard.url}/#/task/{asking}")
    wide.click("#resume-message")
    for part in ("what is ", "6*7?"):
        mark(wide, "#fields")
        wide.keyboard.type(part)
        redrawn(wide, "#fields")
    assert wide.input_value("#resume-message") == "what is 6*7?"

    wide.fill("#resume-message", "x" * 70_000)  # over max_input_bytes: the gateway refuses it (400)
    watch(wide, "#action-error", "resume refused")
    wide.hover("#resume")
    wide.mouse.down()
    mark(wide, "#fields")
    redrawn(wide, "#fields")
    wide.mouse.up()
    shown_when_redrawn(wide)
    assert "resume refused" in wide.inner_text("#action-error")
    assert len(wide.input_value("#resume-message")) == 70_000  # to be shortened, not typed again
    assert dashboard.status(asking)["lifecycle_state"] == "blocked"
    cancel(dashboard, asking)


def test_a_press_on_a_listed_task_begun_before_the_list_redraws_opens_it(dashboard: Dashboard, wide: Any) -> None:
    """The live list redraws when a task below the pressed one changes: the press, released after, still
    opens the pressed task's page (its row, unchanged, was kept)."""
    older = dashboard.submit("sleep 60")
    dashboard.wait_for(older, {"running"})
    pressed = dashboard.submit("echo pressed")
    assert dashboard.wait_for(pressed, {"done", "failed"})["lifecycle_state"] == "done"
    login(wide, dashboard, "read")
    wide.wait_for_selector(f'tr[data-task="{older}"] td.lifecycle >> text=running')
    wide.hover(f'tr[data-task="{pressed}"] a')
    wide.mouse.down()
    cancel(dashboard, older)
    wide.wait_for_selector(f'tr[data-task="{older}"] td.lifecycle >> text=canceled')
    wide.mouse.up()
    wide.wait_for_selector(f"h1 >> text={pressed}")


def test_a_submit_token_is_offered_resume_but_no_admin_action(dashboard: Dashboard, wide: Any) -> None:
    """Approve, suspend, cancel and retry need an admin token: a submit token is shown Resume only."""
    asking = dashboard.submit("help me")
    assert dashboard.wait_for(asking, {"blocked"})["lifecycle_state"] == "blocked"
    login(wide, dashboard, "submit")
    wide.goto(f"{dashboard.url}/#/task/{asking}")
    wide.wait_for_selector("#resume")
    assert wide.locator("#cancel").count() == 0 and wide.locator("#suspend").count() == 0
    cancel(dashboard, asking)


# The label boxes of every machine's diagram, every edge shown (a special row's too, as when taken), in the
# diagram's own units; with the states' boxes and the drawing's size.
MEASURE = """async () => {
  const out = {};
  const machines = await (await fetch('/v1/machines', {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('pegasus.token')}})).json();
  for (const m of machines) {
    const res = await fetch(`/dashboard/machines/${m.name}.svg`, {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('pegasus.token')}});
    const svg = document.importNode(new DOMParser().parseFromString(await res.text(), 'image/svg+xml').documentElement, true);
    document.getElementById('main').replaceChildren(svg);
    for (const edge of svg.querySelectorAll('g.edge')) edge.classList.add('taken');
    const box = (el) => { const b = el.getBBox(); return [b.x, b.y, b.width, b.height]; };
    out[m.name] = {
      size: svg.getAttribute('viewBox').split(' ').map(Number).slice(2),
      labels: [...svg.querySelectorAll('g.edge')].map((g) => ({
        edge: g.dataset.from + '>' + g.dataset.to, box: box(g.querySelector('text')),
        lines: [...g.querySelectorAll('text tspan')].map((t) => t.textContent),
        title: g.querySelector('title').textContent})),
      states: [...svg.querySelectorAll('g.state rect')].map(box)};
  }
  return out;
}"""


def meets(a: list[float], b: list[float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_the_diagrams_labels_never_overlap_a_state_or_each_other_and_are_never_cut(
        dashboard: Dashboard, wide: Any) -> None:
    """Every machine, every edge lit: each label's box as the browser draws it meets no other label and no
    state, lies inside the drawing, and holds its edge's events whole."""
    login(wide, dashboard, "read")
    measured = wide.evaluate(MEASURE)
    assert set(measured) >= {"classic", "reason_act", "lifecycle"}
    for name, drawn in measured.items():
        width, height = drawn["size"]
        labels = drawn["labels"]
        for i, label in enumerate(labels):
            for other in labels[i + 1:]:
                assert not meets(label["box"], other["box"]), (name, label, other)
            assert not any(meets(label["box"], state) for state in drawn["states"]), (name, label)
            x, y, w, h = label["box"]
            assert w > 0 and 0 <= x and x + w <= width and 0 <= y and y + h <= height, (name, label)
        for label in labels:
            events = label["title"].split(": ", 1)[1].split(" / ")
            assert label["lines"] == events and not any("\u2026" in line for line in label["lines"]), (name, label)


GANTT = """() => {
  const card = document.getElementById('gantt'), svg = card.querySelector('svg.gantt');
  const inner = card.getBoundingClientRect(), style = getComputedStyle(card);
  const right = inner.right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth) + 0.5;
  const r = (el) => el.getBoundingClientRect();
  const bar = svg.querySelector('g.stage.running rect');
  return {overflows: card.scrollWidth > card.clientWidth, svgRight: r(svg).right, right,
          textsOut: [...svg.querySelectorAll('text')].filter((t) => r(t).right > r(svg).right + 0.5 || r(t).left < r(svg).left - 0.5)
                                                     .map((t) => t.textContent),
          ticks: [...svg.querySelectorAll('text.tick')].map((t) => [Number(t.dataset.ms), t.textContent]),
          running: bar ? bar.getAttribute('width') : null,
          runningStage: bar ? bar.parentNode.dataset.stage : null};
}"""


def test_the_gantt_fits_its_card_at_800px_draws_the_running_stage_and_ticks_round(
        dashboard: Dashboard, narrow: Any) -> None:
    """At 800 px the chart stays inside its card (no text out of it); the stage running now is a bar that
    grows to the present; the axis ticks are 0, s, 2s ... with s 1, 2 or 5 x 10^n ms."""
    task_id = dashboard.submit("sleep 30")
    dashboard.wait_for(task_id, {"running"})
    login(narrow, dashboard, "read")
    narrow.goto(f"{dashboard.url}/#/task/{task_id}")
    narrow.wait_for_selector('svg.gantt g.stage.running[data-stage="act"]')
    first = narrow.evaluate(GANTT)
    narrow.wait_for_function("w => Number(document.querySelector('svg.gantt g.stage.running rect').getAttribute('width')) > w",
                             arg=float(first["running"]))  # it grows, with no event from the task
    for drawn in (first, narrow.evaluate(GANTT)):
        assert not drawn["overflows"] and drawn["svgRight"] <= drawn["right"], drawn
        assert drawn["textsOut"] == [], drawn
        values = [ms for ms, _ in drawn["ticks"]]
        step = values[1] - values[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m) for m in (1, 2, 5)), drawn["ticks"]
        assert all(math.isclose(v, i * step, abs_tol=1e-6) for i, v in enumerate(values)), drawn["ticks"]
        assert all(text.endswith((" ms", " s", " min")) for _, text in drawn["ticks"]), drawn["ticks"]
    cancel(dashboard, task_id)


def test_the_queue_count_agrees_with_its_list_capabilities_read_and_times_are_local(
        dashboard: Dashboard, wide: Any, failed: str) -> None:
    """A retried task waits out its back-off in the queued state: the queue card counts it and lists it.
    The task's page shows its creation in the browser's time zone; the pools page says a member advertises
    no capability instead of showing ``{}``."""
    task_id = failed
    dashboard.client.retry(task_id)
    assert dashboard.status(task_id)["lifecycle_state"] == "queued"
    login(wide, dashboard, "read")
    wide.wait_for_selector(f'#queued a[href="#/task/{task_id}"]')
    listed = wide.locator("#queued li").count()
    assert wide.inner_text("#queued-count") == f"{listed} queued"
    assert listed == len([t for t in dashboard.client.list(state="queued")
                          if t["lifecycle_state"] == "queued"])

    wide.goto(f"{dashboard.url}/#/task/{task_id}")
    created = datetime.fromisoformat(dashboard.status(task_id)["created_at"])
    wide.wait_for_selector('dd[data-field="created"] time')
    assert wide.inner_text('dd[data-field="created"]') == (created + IST - created.utcoffset()).strftime("%Y-%m-%d %H:%M:%S")

    wide.click('#nav a[data-page="pools"]')
    wide.wait_for_selector("#members td.capabilities")
    assert wide.inner_text("#members td.capabilities") == "none advertised"
    cancel(dashboard, task_id)


def test_a_schedule_is_created_from_the_page_and_a_refusal_stays_shown(dashboard: Dashboard, wide: Any) -> None:
    """The form posts to /v1/schedules: a bad interval's 400 is shown and stays through the table's redraw;
    a cron rule is added in the browser's time zone, listed, and the system has it."""
    wide.clock.install()  # the page's timers run as ever, and the test can bring its next redraw forward
    login(wide, dashboard, "admin")
    wide.click('#nav a[data-page="schedules"]')
    wide.fill("#schedule-name", "too-often")
    wide.fill("#schedule-text", "echo tick")
    wide.fill("#schedule-rule", "0s")
    wide.click("#schedule-add")
    wide.wait_for_selector("#schedule-error >> text=not added")
    wide.wait_for_selector("#schedules")
    mark(wide, "#schedules")
    wide.clock.fast_forward(5000)  # the table's redraw (every 5 s) now ...
    redrawn(wide, "#schedules")  # ... leaves the refusal in sight
    assert "not added" in wide.inner_text("#schedule-error")
    assert wide.input_value("#schedule-name") == "too-often"

    wide.fill("#schedule-name", "nightly")
    wide.select_option("#schedule-kind", "cron")
    wide.fill("#schedule-rule", "0 3 * * *")
    zone = wide.evaluate("() => Intl.DateTimeFormat().resolvedOptions().timeZone")  # Asia/Calcutta in ICU's words
    assert zone in ("Asia/Kolkata", "Asia/Calcutta") and wide.input_value("#schedule-tz") == zone  # by default
    wide.click("#schedule-add")
    wide.wait_for_selector('tr[data-schedule="nightly"] >> text=active')
    assert wide.inner_text("#schedule-error") == ""
    [made] = [s for s in dashboard.client.schedules() if s["name"] == "nightly"]
    assert (made["cron"], made["tz"], made["text"]) == ("0 3 * * *", zone, "echo tick")
    assert not [s for s in dashboard.client.schedules() if s["name"] == "too-often"]
    # its next time, 03:00 in the browser's zone
    assert wide.inner_text('tr[data-schedule="nightly"] td:nth-child(4)').endswith(" 03:00:00")
    dashboard.client.schedule_remove("nightly")
