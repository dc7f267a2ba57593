"""The store's statements per classic task (``benchmarks/checkpoint.py`` ``statements``): a count, kept.

Main at 06b5d1f ran 74 SQL statements a task with its reports in one commit and 86 with each alone
(75 and 87 calls into sqlite3): a savepoint around every write, a task-row UPDATE per transition."""

from __future__ import annotations

from benchmarks.checkpoint import statements


def test_a_classic_task_costs_the_store_at_most_the_statements_measured() -> None:
    together, alone = statements(5, together=True), statements(5, together=False)
    assert together["statements_per_task"] <= 38 and together["calls_per_task"] <= 18
    assert alone["statements_per_task"] <= 56 and alone["calls_per_task"] <= 45
    for figures in (together, alone):
        kinds = figures["statements_by_kind"]
        assert kinds["INSERT transitions"] == 14 and kinds["INSERT checkpoints"] == 5  # every row still written
        assert kinds.get("SAVEPOINT", 0) <= 1  # the task's creation only
    assert together["statements_by_kind"]["UPDATE tasks"] <= 3  # 13 before: one per transition
    assert together["calls_by_kind"]["INSERT transitions"] <= 2  # one executemany a commit
