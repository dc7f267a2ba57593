"""A task actor's reports of several tasks in one message, on real processes (issue 33).

The supervisor is stopped (SIGSTOP) while six runs held by one task actor each finish a
step: the task actor's first report waits for its acknowledgement, the others are held
and leave together once the supervisor reads again.  Killed instead while it holds them,
the task actor loses only what the durability contract allows: each run resumes from its
last committed checkpoint and does the uncommitted step again (docs/durability.md).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.support.hold import PLUGIN, mark_twice_request
from tests.support.processes import paused
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
TASKS = 6


def _marks(path: Path) -> Counter[str]:
    return Counter(path.read_text(encoding="utf-8").split()) if path.exists() else Counter()


def _held_at_first_step(client, tmp_path: Path, name: str) -> tuple[list[str], Path, Path, list[Path]]:
    """TASKS runs, each held in its first step (a worker each) until its own release file exists; their ids
    and files (first, second, the releases)."""
    first, second = (tmp_path / f"{name}-{part}" for part in ("first", "second"))
    releases = [tmp_path / f"{name}-release-{n}" for n in range(TASKS)]
    tasks = [t["task_id"] for t in client.submit_many(
        [mark_twice_request(first, second, f"n{n}", releases[n]) for n in range(TASKS)])]
    wait_for(lambda: len(_marks(first)) == TASKS, timeout=60, what="every run in its first step")
    return tasks, first, second, releases


def test_reports_made_while_the_supervisor_is_busy_leave_together_and_a_killed_task_actor_loses_only_them(
        pegasus, tmp_path: Path) -> None:
    client = pegasus(tools={"plugins": [PLUGIN]}, runtime={"max_active_tasks": TASKS, "task_actors_max": 1},
                     pools={"tool_workers": TASKS})
    supervisor = client.stats()["supervisor_pid"]

    # Batching: the first report waits for the stopped supervisor's acknowledgement; the rest are held.
    tasks, first, second, releases = _held_at_first_step(client, tmp_path, "batch")
    before = client.stats()["reports"]
    with paused(supervisor):
        for release in releases:
            release.touch()
        wait_for(lambda: len(_marks(second)) == TASKS, timeout=60, what="every run past its first step")
    finals = [client.wait(task_id, timeout=90) for task_id in tasks]
    assert all(f["lifecycle_state"] == "done" and f["runs"] == 1 for f in finals), finals
    after = client.stats()["reports"]
    assert after["most_tasks"] >= 3, (before, after)  # before: one task's reports per message, always
    assert after["messages"] - before["messages"] < after["reports"] - before["reports"]

    # A task actor killed while it holds reports: they were never committed, and their runs redo that step.
    # One run first: its report is in flight, unacknowledged, so the others' reports are surely held (were all
    # released together, a loaded machine could hand the task actor every answer in one pass: one message).
    tasks, first, second, releases = _held_at_first_step(client, tmp_path, "kill")
    victim = client.get(tasks[0])["actor_pid"]
    assert {client.get(task_id)["actor_pid"] for task_id in tasks} == {victim}
    with paused(supervisor):
        releases[0].touch()
        wait_for(lambda: _marks(second)["n0"] == 1, timeout=60, what="the first run past its first step")
        for release in releases[1:]:
            release.touch()
        wait_for(lambda: len(_marks(second)) == TASKS, timeout=60, what="every run past its first step")
        os.kill(victim, signal.SIGKILL)
    finals = [client.wait(task_id, timeout=90) for task_id in tasks]
    assert all(f["lifecycle_state"] == "done" and f["runs"] == 2 for f in finals), finals
    again = _marks(first)
    for n, task_id in enumerate(tasks):  # each resumed from its last committed checkpoint: only what followed, again
        history = client.history(task_id)["cognitive"]
        lost, resumed = [h for h in history if h["run"] == 1], [h for h in history if h["run"] == 2]
        step_committed = any(h["event"] == "TOOL_CALL_COMPLETED" for h in lost)
        assert again[f"n{n}"] == (1 if step_committed else 2), (n, again, history)
        assert resumed[0]["from_state"] == lost[-1]["to_state"]
    # The message in flight at the kill (n0's report) may still be read and committed; the reports held were lost.
    assert all(again[f"n{n}"] == 2 for n in range(1, TASKS)), again
