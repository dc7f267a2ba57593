"""A real system's pools hand out a task's stages by its priority (pegasus.pool.order), not only admission."""

from __future__ import annotations

from datetime import datetime


def test_a_more_urgent_task_submitted_last_finishes_first_when_every_task_runs(pegasus) -> None:
    """All four run at once (no admission queue): only the pools' order can put the priority-1 task first.
    One worker a pool and 300 ms stages keep requests waiting in each; first come, it finished last."""
    client = pegasus(pools={"llm_workers": 1, "tool_workers": 1}, cognition={"latency_ms": 300},
                     runtime={"max_active_tasks": 10, "default_machine": "classic"})
    later = [client.submit(f"what is {n} + 1?")["task_id"] for n in range(3)]
    urgent = client.submit("what is 9 + 1?", priority=1)["task_id"]
    done = {task_id: client.wait(task_id, timeout=120) for task_id in [*later, urgent]}
    assert {task["lifecycle_state"] for task in done.values()} == {"done"}
    ended = {task_id: datetime.fromisoformat(task["updated_at"]) for task_id, task in done.items()}
    assert all(ended[urgent] < ended[task_id] for task_id in later), ended
