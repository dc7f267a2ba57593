"""benchmarks/msgprof.py: an actor forked inside a handler (the supervisor creating a task actor or a pool) writes
only what it handled itself, not its parent's counts or its parent's profiler (issue 33's cProfile split)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks import msgprof


def test_a_process_forked_inside_a_profiled_handler_writes_only_its_own_counts(tmp_path: Path) -> None:
    totals = msgprof._Totals(tmp_path, frozenset({"supervisor"}))
    children: list[int] = []

    def handler() -> None:  # the supervisor's, creating an actor: the fork comes inside it
        child = os.fork()
        if child == 0:
            try:  # the task actor's own first message, then its files
                totals.add("task actors", "StartTasks", 0.0)
                totals.dump()
            finally:
                os._exit(0)
        children.append(child)
        os.waitpid(child, 0)

    totals.add("supervisor", "SubmitMany", 0.001)  # counted before the fork
    profiler = totals.profiler("supervisor")
    assert profiler is not None
    profiler.runcall(handler)
    totals.add("supervisor", "TaskReports", 0.001)
    totals.dump()
    child, me = children[0], os.getpid()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        f"supervisor-{me}.json", f"supervisor-{me}.prof", f"task actors-{child}.json"]  # before: the child's too
    assert json.loads((tmp_path / f"task actors-{child}.json").read_text()) == {"StartTasks": [1, 0.0]}
    assert msgprof.read(tmp_path)["supervisor"] == {"SubmitMany": [1, 0.001], "TaskReports": [1, 0.001]}
