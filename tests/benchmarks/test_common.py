"""The harness reads every task of a run, however many: ``ListTasks`` caps a page (10,000), and the
``scale`` scenario's 10,000 tasks once asked for 10,010 at once and lost every figure of its run."""

from __future__ import annotations

from benchmarks.common import every_task, pegasus_system, state_dir


def test_every_task_reads_page_after_page() -> None:
    with state_dir() as state, pegasus_system(state) as system:
        ids = [task["task_id"] for task in system.client.submit_many([f"what is {i} + 1?" for i in range(5)])]
        rows = every_task(system.client, page=2)
    assert sorted(row["task_id"] for row in rows) == sorted(ids)
