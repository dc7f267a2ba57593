"""What an operator asks of the store (issue 31): search, deleting a tree, purging, the retention timer's
policy, a task's log.  Real SQLite files; the handlers as the supervisor calls them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pegasus import codec
from pegasus.requests import DeleteTask, ListTasks, Purge, TaskLog
from pegasus.store import Store, retention, search, task_log
from pegasus.store.checkpoint import encode_full
from pegasus.store.schema import MIGRATIONS
from pegasus.store.tree import Link
from pegasus.task import ActionResult, TaskFSM
from pegasus.task.errors import TaskNotFoundError

seqs = iter(range(1, 1_000_000))


def add(store: Store, task_id: str, text: str = "count things", metadata: dict[str, Any] | None = None,
        parent: str | None = None) -> None:
    fsm = TaskFSM.create("classic", text, task_id=task_id)
    row: dict[str, Any] = {"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                           "seq": next(seqs), "input": text, "source": "test", "metadata": metadata or {}}
    if parent is not None:
        row["link"] = Link(task_id, parent, 1, f"{parent}:step:{task_id}", 0)
    store.create_task(row, encode_full(fsm.snapshot()))


def finish(store: Store, task_id: str, state: str = "done", result: Any = None) -> None:
    store.lifecycle_transition(task_id, "draft", state, "TASK_DONE", actor="test", reason="end",
                               updates={"result": result} if state == "done" else None)


def ids(page: list[dict[str, Any]]) -> list[str]:
    return [row["task_id"] for row in page]


def rows_of(store: Store, task_id: str) -> dict[str, int]:
    tables = ("tasks", "checkpoints", "transitions", "audit", "journal", "subtasks", "task_meta")
    return {t: store.db.execute(f"SELECT COUNT(*) FROM {t} WHERE {'child_id' if t == 'subtasks' else 'task_id'} = ?",
                               (task_id,)).fetchone()[0] for t in tables}


# -- search ------------------------------------------------------------------------------------------------

def test_text_search_finds_words_of_the_input_and_of_the_result(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    add(store, "a", "what is 2+2")
    add(store, "b", "echo hello world")
    add(store, "c", "summarise the report")
    finish(store, "c", result={"answer": "the budget grew"})
    assert ids(store.list_tasks(text="hello")) == ["b"]
    assert ids(store.list_tasks(text="budget")) == ["c"]  # in the result (a dict: searched as its JSON)
    assert ids(store.list_tasks(text="echo world")) == ["b"]  # every word, in any order
    assert store.list_tasks(text="echo budget") == []
    assert ids(store.list_tasks(text='2+2 "is')) == ["a"]  # FTS5 syntax in the text is only words
    assert store.list_tasks(text="+++") == [] and store.count_tasks(text="+++") == 0
    assert store.count_tasks(text="the") == 1 and ids(store.list_tasks("done", text="report")) == ["c"]


def test_metadata_filters_match_values_as_text(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    add(store, "a", metadata={"team": "ops", "n": 3, "urgent": True, "nested": {"x": 1}})
    add(store, "b", metadata={"team": "dash", "n": 3})
    assert ids(store.list_tasks(metadata={"team": "ops"})) == ["a"]
    assert ids(store.list_tasks(metadata={"n": "3"})) == ["b", "a"]
    assert ids(store.list_tasks(metadata={"n": "3", "urgent": "true"})) == ["a"]
    assert store.list_tasks(metadata={"nested": '{"x": 1}'}) == []  # only strings, numbers, booleans
    assert store.count_tasks(metadata={"team": "dash"}) == 1


def test_the_search_migration_fills_the_index_for_tasks_already_stored(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    db = sqlite3.connect(path, isolation_level=None)
    before = MIGRATIONS.index([*search.MIGRATION])  # the store as it was before the search migration
    for step in MIGRATIONS[:before]:
        for statement in step:
            db.execute(statement)
    db.execute(f"PRAGMA user_version = {before}")
    db.execute("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, source,"
               " metadata, result, created_at, updated_at) VALUES ('old', 'classic', 'done', 'completed', 5, 1,"
               " 'an old question', 'cli', ?, ?, '2020-01-01T00:00:00+00:00', '2020-01-01T00:00:00+00:00')",
               (codec.pack({"team": "ops"}), codec.pack("forty two")))
    db.close()
    store = Store(path)
    assert ids(store.list_tasks(text="question")) == ["old"]
    assert ids(store.list_tasks(text="forty")) == ["old"]
    assert ids(store.list_tasks(metadata={"team": "ops"})) == ["old"]


def test_list_request_bounds_its_filters() -> None:
    from pegasus.errors import InvalidRequest
    with pytest.raises(InvalidRequest, match="metadata"):
        ListTasks(metadata={str(n): "x" for n in range(17)})
    with pytest.raises(InvalidRequest, match="text"):
        ListTasks(text="")


# -- deleting ----------------------------------------------------------------------------------------------

def test_delete_removes_the_whole_finished_tree_and_every_row_of_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    add(store, "root", "zebra root", metadata={"k": "v"})
    add(store, "child", "zebra child", parent="root")
    add(store, "other", "zebra other")
    store.journal_start("root:1:0", "root", 1, 0, "write_file", "effectful")
    finish(store, "child")
    finish(store, "root", result="zebra")
    reply = retention.delete_tree(store, DeleteTask(task_id="root"), time.time())
    assert sorted(reply["deleted"]) == ["child", "root"] and reply["count"] == 2
    for task_id in ("root", "child"):
        assert rows_of(store, task_id) == dict.fromkeys(
            ("tasks", "checkpoints", "transitions", "audit", "journal", "subtasks", "task_meta"), 0)
    assert ids(store.list_tasks(text="zebra")) == ["other"]  # the search rows went too
    assert store.task_row("other") is not None


def test_delete_refuses_a_tree_with_a_task_not_finished_and_changes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    add(store, "root")
    add(store, "child", parent="root")
    finish(store, "root")
    with pytest.raises(retention.TaskTreeNotFinished, match=r"1 task\(s\) not finished: child \(draft\)"):
        retention.delete_tree(store, DeleteTask(task_id="root"), time.time())
    finish(store, "child", "failed")
    store.lifecycle_transition("root", "done", "running", "X", actor="t", reason="again")
    with pytest.raises(retention.TaskTreeNotFinished, match="sub-task of root, which is running"):
        retention.delete_tree(store, DeleteTask(task_id="child"), time.time())
    assert store.task_row("root") is not None and store.task_row("child") is not None
    with pytest.raises(TaskNotFoundError):
        retention.delete_tree(store, DeleteTask(task_id="nope"), time.time())


def test_purge_deletes_old_finished_trees_by_age_and_state(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    for task_id, state in (("old-done", "done"), ("old-failed", "failed"), ("new-done", "done"), ("old-busy", None)):
        add(store, task_id)
        if state:
            finish(store, task_id, state)
    add(store, "old-child", parent="old-busy")
    finish(store, "old-busy")  # its child has not finished: the tree stays
    store.db.execute("UPDATE tasks SET updated_at = '2020-01-01T00:00:00+00:00' WHERE task_id LIKE 'old-%'")
    now = time.time()
    reply = retention.purge(store, Purge(older_than_days=30, state="failed"), now)
    assert reply["deleted"] == ["old-failed"] and not reply["more"]
    reply = retention.purge(store, Purge(older_than_days=30), now)
    assert reply["deleted"] == ["old-done"] and reply["skipped"] == 1
    assert sorted(ids(store.list_tasks())) == ["new-done", "old-busy", "old-child"]
    assert retention.purge(store, Purge(older_than_days=0), now + 1)["deleted"] == ["new-done"]


def test_purge_answers_more_past_its_limit(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    for n in range(3):
        add(store, f"t{n}")
        finish(store, f"t{n}")
    first = retention.purge(store, Purge(older_than_days=0, limit=2), time.time() + 1)
    assert first["count"] == 2 and first["more"]
    assert retention.purge(store, Purge(older_than_days=0, limit=2), time.time() + 1)["count"] == 1


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_the_sweep_falls_on_the_next_hour_of_the_clock(now: float) -> None:
    delay = retention.sweep_delay(now)
    assert 0 < delay <= retention.SWEEP_PERIOD_S
    assert (now + delay) % retention.SWEEP_PERIOD_S == pytest.approx(0, abs=1e-3) or \
        (now + delay) % retention.SWEEP_PERIOD_S == pytest.approx(retention.SWEEP_PERIOD_S, abs=1e-3)


def test_retention_is_off_at_zero_days_and_its_cutoff_is_days_before_now() -> None:
    assert retention.sweep_request(0) is None
    assert retention.sweep_request(7) == {"older_than_days": 7, "state": None}
    assert retention.cutoff(86400 * 3, 1) == "1970-01-03T00:00:00+00:00"


# -- the log -----------------------------------------------------------------------------------------------

def test_the_log_has_transitions_stage_errors_step_downs_and_tool_output_in_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    fsm = TaskFSM.create("classic", "echo hi", task_id="t")
    add(store, "t", "echo hi")
    store.cognitive_transition("t", 1, "classic", "idle", "perceiving", "TASK_CREATED", None, None, None)
    store.cognitive_transition("t", 1, "classic", "perceiving", "thinking", "PERCEIVE_DONE",
                               {"stage": "perceive", "started": 1.0, "finished": 1.25, "ok": True, "error": None,
                                "usage": {"model": "m", "ladder": ["response_format refused: sent as text"]}},
                               None, None)
    store.cognitive_transition("t", 1, "classic", "thinking", "thinking", "THINK_FAILED",
                               {"stage": "think", "ok": False, "error": "model said no"}, None, None)
    snapshot = fsm.snapshot()
    context = snapshot.context.model_copy(update={"actions_done": [
        ActionResult(step_index=0, tool="echo", success=True, output="hi")]})
    store.cognitive_transition("t", 1, "classic", "acting", "reflecting", "TOOL_CALL_COMPLETED", {"stage": "act"},
                               ("full", encode_full(snapshot.model_copy(update={"context": context}))), None)
    page = task_log.task_log(store, TaskLog(task_id="t"), time.time())
    kinds = [(e["kind"], e.get("event") or e.get("stage") or e.get("tool")) for e in page["entries"]]
    assert kinds == [("transition", "TASK_CREATED"), ("transition", "TASK_CREATED"), ("transition", "PERCEIVE_DONE"),
                     ("step_down", "perceive"), ("transition", "THINK_FAILED"), ("error", "think"),
                     ("transition", "TOOL_CALL_COMPLETED"), ("tool", "echo")]
    assert page["entries"][2]["seconds"] == 0.25 and page["entries"][-1]["output"] == "hi"
    assert page["entries"][5]["error"] == "model said no" and not page["finished"]
    later = task_log.task_log(store, TaskLog(task_id="t", after=page["next"]), time.time())
    assert later["entries"] == [] and later["next"] == page["next"]
    with pytest.raises(TaskNotFoundError):
        task_log.task_log(store, SimpleNamespace(task_id="nope", after=0), time.time())
