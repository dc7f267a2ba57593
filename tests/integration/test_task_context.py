"""``Client.context`` against a real system: a finished task's plan, its steps' results and its reflection,
rebuilt from its checkpoints; an unknown task is refused by name."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actors.client import Client, RequestError

pytestmark = pytest.mark.integration


def test_a_finished_tasks_context_has_its_plan_and_each_steps_result(pegasus: Callable[..., Client]) -> None:
    client = pegasus()
    task = client.wait(client.submit("what is 2 + 3 * 4?")["task_id"], timeout=60)
    assert task["lifecycle_state"] == "done"
    known = client.context(task["task_id"])
    assert known["state"] == "completed"
    steps = known["context"]["plan"]["steps"]
    assert steps and all(step["completed"] for step in steps)
    assert [r["step_index"] for r in known["context"]["actions_done"]] == [s["index"] for s in steps]
    assert known["context"]["reflections"][-1]["verdict"] == "complete"
    with pytest.raises(RequestError, match="no-such-task"):
        client.context("no-such-task")
