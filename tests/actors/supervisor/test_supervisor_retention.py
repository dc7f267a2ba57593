"""The supervisor's retention sweep (``[store] retain_days``, issue 31): when its timer fires, the finished task
trees older than that are deleted, the rest kept; at 0 days nothing is.  simpleSystemBase, a real store file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from thespian.actors import ActorSystem, WakeupMessage

from actors import messages as m
from actors.supervisor import Supervisor
from pegasus.store import Store
from pegasus.store.sqlite import DB_FILE
from tests.actors.test_simple_system import settings_for
from tests.pegasus.store.test_store_ops import add, finish


def stored(tmp_path: Path) -> None:
    """Two finished tasks, one of them a year old, and an old one still running."""
    store = Store.in_state_dir(tmp_path)
    for task_id in ("old", "new", "old-running"):
        add(store, task_id)
    finish(store, "old")
    finish(store, "new")
    store.lifecycle_transition("old-running", "draft", "running", "TASK_STARTED", actor="test", reason="go")
    store.db.execute("UPDATE tasks SET updated_at = '2020-01-01T00:00:00+00:00' WHERE task_id LIKE 'old%'")
    store.close()


@pytest.mark.parametrize("days,kept", [(30.0, ["new", "old-running"]), (0.0, ["new", "old", "old-running"])])
def test_the_sweep_deletes_trees_older_than_retain_days(tmp_path: Path, days: float, kept: list[str]) -> None:
    stored(tmp_path)
    asys = ActorSystem("simpleSystemBase", transientUnique=True, logDefs=False)
    try:
        supervisor = asys.createActor(Supervisor)
        settings = settings_for(tmp_path, store={"retain_days": days}, pools={"llm_workers": 1, "tool_workers": 1})
        assert asys.ask(supervisor, m.Configure(request_id="c", settings=settings), 10).ok
        asys.tell(supervisor, WakeupMessage(timedelta(0), m.RetentionDue()))
        listed = asys.ask(supervisor, m.ListTasks(request_id="l"), 10)
        assert sorted(row["task_id"] for row in listed.data["tasks"]) == kept
    finally:
        asys.shutdown()
    assert (tmp_path / DB_FILE).exists()
