"""Task reports that arrive alone share a commit, on real processes (issue 33, pegasus.store.drain).

When stages wait, each report reaches the supervisor alone.  A group of reports that told no one
anything lingers ``[store] commit_linger_ms`` for the next ones, and its timer commits it: the store
file shows every task done without anything asked of the supervisor.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
TASKS = 3


def _committed_done(path: Path, task_ids: list[str]) -> int:
    """Tasks done in what another process reads of the file: only what is committed."""
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(task_ids))
        return int(reader.execute(f"SELECT COUNT(*) FROM tasks WHERE lifecycle_state = 'done' AND task_id IN ({marks})",
                                  task_ids).fetchone()[0])
    finally:
        reader.close()


def test_reports_that_arrive_alone_share_a_commit_and_the_last_is_committed_by_its_timer(
        pegasus, state_dir: Path) -> None:
    client = pegasus(cognition={"latency_ms": 50}, store={"commit_linger_ms": 1000},
                     runtime={"task_actors_max": 1})
    before = client.stats()["reports"]
    tasks = [t["task_id"] for t in client.submit_many([f"what is {n} + 1?" for n in range(TASKS)])]
    # Nothing is asked of the supervisor meanwhile: the last reports' group is committed by its timer alone.
    wait_for(lambda: _committed_done(state_dir / "pegasus.db", tasks) == TASKS, timeout=60,
             what="every task done in the store file")
    after = client.stats()["reports"]
    messages, commits = after["messages"] - before["messages"], after["commits"] - before["commits"]
    assert 0 < commits < messages, (before, after)  # before: a commit for each TaskReports that came alone
