"""A run's end held while many runs wait for their stages (issue 33) still reaches the supervisor when no
other message comes: the task actor's timer sends it (pegasus/run/report_batch.py ``wake_after``).

Ten runs on one task actor hold their tool workers; one is let go and ends while the other nine still wait
(their holds time out only after 20 s). Nothing else can carry its report: the pools run in processes of their own
(not in this task actor, whose pools' timers would) and no reflection answers; no tool step is held behind another's
hold (``tool_prefetch = 0``).  It is done while they still hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pegasus.run.host import HOLD_RUNS
from tests.support.hold import PLUGIN
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
TASKS = HOLD_RUNS + 2


def _marks(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def test_a_runs_end_held_while_eight_runs_wait_still_arrives_when_no_message_comes(pegasus, tmp_path: Path) -> None:
    client = pegasus(tools={"plugins": [PLUGIN]}, runtime={"max_active_tasks": TASKS, "task_actors_max": 1},
                     pools={"tool_workers": TASKS, "home_host": False, "tool_prefetch": 0},
                     memory={"reflector": False})
    marks = tmp_path / "marks"
    releases = [tmp_path / f"release-{n}" for n in range(TASKS)]
    tasks = [t["task_id"] for t in client.submit_many(
        [f"call mark_until {json.dumps({'path': str(marks), 'tag': f'n{n}', 'release': str(releases[n])})}"
         for n in range(TASKS)])]
    wait_for(lambda: len(_marks(marks)) == TASKS, timeout=60, what="every run in its step")
    releases[0].touch()
    final = client.wait(tasks[0], timeout=60)
    assert final["lifecycle_state"] == "done", final
    assert [client.get(task_id)["lifecycle_state"] for task_id in tasks[1:]] == ["running"] * (TASKS - 1)
    for release in releases[1:]:
        release.touch()
    assert all(client.wait(task_id, timeout=60)["lifecycle_state"] == "done" for task_id in tasks[1:])
