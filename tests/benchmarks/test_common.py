"""The harness's reads of a system: every task of a run, however many (``ListTasks`` caps a page at 10,000:
``scale``'s 10,000 tasks once asked for 10,010 and lost every figure of its run), and every worker up."""

from __future__ import annotations

from typing import Any

from benchmarks.common import every_task, pegasus_system, state_dir, wait_workers


def test_every_task_reads_page_after_page() -> None:
    with state_dir() as state, pegasus_system(state) as system:
        ids = [task["task_id"] for task in system.client.submit_many([f"what is {i} + 1?" for i in range(5)])]
        rows = every_task(system.client, page=2)
    assert sorted(row["task_id"] for row in rows) == sorted(ids)


class _Stats:
    """``stats`` answers in turn: the llm pool too busy to answer (no workers shown), then every worker up."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = [
            {"pools": {"llm": {"responsive": False}, "tool": {"workers": [{"pid": 2}]}}},
            {"pools": {"llm": {"workers": [{"pid": 1}, {"pid": None}]}, "tool": {"workers": [{"pid": 2}]}}},
            {"pools": {"llm": {"workers": [{"pid": 1}, {"pid": 3}]}, "tool": {"workers": [{"pid": 2}]}}}]

    def stats(self) -> dict[str, Any]:
        return self.answers.pop(0)


def test_waiting_for_the_workers_outlasts_a_pool_that_did_not_answer_stats() -> None:
    """On a loaded machine a pool starting 100 workers misses ``stats``' 2 s: shown without its workers."""
    client = _Stats()
    wait_workers(client, timeout=60)  # type: ignore[arg-type]
    assert client.answers == []
