"""The SQLite store: schema, compare-and-set, checkpoints, corrupt rows, growth per step."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pegasus.store import Checkpointer, CorruptCheckpoint, StaleStateError, Store, kind_for, rebuild
from pegasus.store import delta
from pegasus.store import checkpoint
from pegasus.store.checkpoint import encode_full, full_context
from pegasus.store.journal import FINISHED, INTERRUPTED_STATUS, StepEnd
from pegasus.store.schema import MIGRATIONS, SCHEMA_VERSION
from pegasus.task import TaskFSM


def new_task(store: Store, task_id: str = "t1", state: str = "draft") -> TaskFSM:
    fsm = TaskFSM.create("classic", "count things", task_id=task_id)
    store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                       "seq": 1, "input": "count things", "source": "test"}, encode_full(fsm.snapshot()))
    return fsm


def test_schema_is_created_and_versioned(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    assert store.schema_version() == SCHEMA_VERSION
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    assert Store(tmp_path / "p.db").schema_version() == SCHEMA_VERSION  # reopening migrates nothing


def test_lifecycle_transition_writes_state_audit_and_history(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    store.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="user", reason="ok",
                               updates={"attempts": 1})
    assert store.task_row("t1")["lifecycle_state"] == "approved"
    audit = store.audit("t1")
    assert [a["event_type"] for a in audit] == ["TASK_CREATED", "STATE_TRANSITION_APPROVED"]
    assert audit[1]["payload"] == {"from_state": "draft", "to_state": "approved", "actor": "user", "reason": "ok",
                                   "transition_metadata": {}}
    assert [(t["from_state"], t["to_state"]) for t in store.transitions("t1")] == [("-", "draft"), ("draft", "approved")]


def test_list_tasks_pages_newest_first_and_counts_them_all(tmp_path: Path) -> None:
    """Regression (issue 16): the list showed the oldest 1,000 tasks and hid the rest."""
    store = Store(tmp_path / "p.db")
    for seq in range(1, 8):
        fsm = TaskFSM.create("classic", f"task {seq}", task_id=f"t{seq}")
        store.create_task({"task_id": f"t{seq}", "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                           "seq": seq, "input": f"task {seq}", "source": "test"}, encode_full(fsm.snapshot()))
    store.lifecycle_transition("t2", "draft", "approved", "TASK_APPROVED", actor="user", reason="ok")
    assert [r["task_id"] for r in store.list_tasks(limit=3)] == ["t7", "t6", "t5"]
    assert [r["task_id"] for r in store.list_tasks(limit=3, offset=6)] == ["t1"]
    assert store.list_tasks(limit=3, offset=7) == []
    assert store.count_tasks() == 7
    assert [r["task_id"] for r in store.list_tasks("draft", limit=2, offset=1)] == ["t6", "t5"]
    assert store.count_tasks("draft") == 6 and store.count_tasks("approved") == 1
    assert store.count_tasks("idle") == 7  # the cognitive state matches too


def test_compare_and_set_refuses_a_stale_writer(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    store.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="s", reason="")
    with pytest.raises(StaleStateError, match="expected state 'draft', store has 'approved'"):
        store.lifecycle_transition("t1", "draft", "canceled", "TASK_CANCELED", actor="s", reason="")
    assert store.task_row("t1")["lifecycle_state"] == "approved"
    assert len(store.audit("t1")) == 2  # the loser wrote no audit row


def test_two_writers_racing_on_one_task_exactly_one_wins(tmp_path: Path) -> None:
    first = Store(tmp_path / "p.db")
    new_task(first)
    first.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="s", reason="")
    first.lifecycle_transition("t1", "approved", "queued", "TASK_QUEUED", actor="s", reason="")
    writers = [Store(tmp_path / "p.db") for _ in range(2)]
    barrier, outcomes = threading.Barrier(2), {}

    def race(index: int, target: str, event: str) -> None:
        barrier.wait()
        try:
            writers[index].lifecycle_transition("t1", "queued", target, event, actor=f"w{index}", reason="race")
            outcomes[index] = "won"
        except StaleStateError:
            outcomes[index] = "lost"

    threads = [threading.Thread(target=race, args=(0, "running", "TASK_STARTED")),
               threading.Thread(target=race, args=(1, "canceled", "TASK_CANCELED"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == ["lost", "won"]
    winner = 0 if outcomes[0] == "won" else 1
    assert first.task_row("t1")["lifecycle_state"] == ("running", "canceled")[winner]
    assert first.audit("t1")[-1]["payload"]["actor"] == f"w{winner}"


def test_a_group_commits_once_and_keeps_each_write_atomic(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    other = sqlite3.connect(tmp_path / "p.db")  # another reader sees the group only once it ends
    with pytest.raises(RuntimeError, match="after the writes"):
        with store.group():
            store.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="user", reason="ok")
            with pytest.raises(StaleStateError):  # a failed write inside is rolled back alone
                store.lifecycle_transition("t1", "draft", "canceled", "TASK_CANCELED", actor="user", reason="x")
            store.lifecycle_transition("t1", "approved", "queued", "TASK_QUEUED", actor="system", reason="slot")
            assert other.execute("SELECT lifecycle_state FROM tasks").fetchone()[0] == "draft"
            raise RuntimeError("after the writes")  # what succeeded is still committed
    assert other.execute("SELECT lifecycle_state FROM tasks").fetchone()[0] == "queued"
    assert [t["to_state"] for t in store.transitions("t1")] == ["draft", "approved", "queued"]
    assert [a["event_type"] for a in store.audit("t1")] == [
        "TASK_CREATED", "STATE_TRANSITION_APPROVED", "STATE_TRANSITION_QUEUED"]
    assert not store.db.in_transaction
    store.lifecycle_transition("t1", "queued", "running", "TASK_STARTED", actor="system", reason="go")  # on its own again
    assert other.execute("SELECT lifecycle_state FROM tasks").fetchone()[0] == "running"
    other.close()


def test_journal_start_returns_the_known_row(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    assert store.journal_start("k1", "t1", 1, 0, "append_key", "effectful") is None
    again = store.journal_start("k1", "t1", 2, 0, "append_key", "effectful")
    assert again is not None and again["status"] == "started" and again["run"] == 1
    store.cognitive_transition("t1", 1, "classic", "acting", "reflecting", "TOOL_CALL_COMPLETED", None, None,
                               StepEnd("k1", FINISHED, b"\x81\xa1x\x01", 0, "append_key", "effectful"))
    assert store.journal("t1")["k1"]["status"] == "finished" and store.journal("t1")["k1"]["result"] == {"x": 1}


def test_a_step_end_without_a_started_row_is_inserted_and_interrupted_steps_are_listed(tmp_path: Path) -> None:
    """An idempotent step is not journalled as started; its end still lands, so it is never run
    again.  effects_unknown lists interrupted steps, and started ones once the run is over."""
    store = Store(tmp_path / "p.db")
    new_task(store)
    store.cognitive_transition("t1", 1, "classic", "acting", "acting", "TOOL_CALL_COMPLETED", None, None,
                               StepEnd("k0", FINISHED, b"\x81\xa1x\x01", 0, "fetch", "idempotent"))
    assert store.journal("t1")["k0"]["status"] == "finished" and store.journal("t1")["k0"]["effect"] == "idempotent"
    assert store.journal_start("k1", "t1", 1, 1, "append_key", "effectful") is None
    store.cognitive_transition("t1", 1, "classic", "acting", "acting", "TOOL_CALL_FAILED", None, None,
                               StepEnd("k1", INTERRUPTED_STATUS, b"\x80", 1, "append_key", "effectful"))
    assert store.journal_start("k2", "t1", 1, 2, "append_key", "effectful") is None
    assert [e["key"] for e in store.effects_unknown("t1", run_over=False)] == ["k1"]
    unknown = store.effects_unknown("t1", run_over=True)
    assert [(e["key"], e["step_index"], e["tool"], e["run"]) for e in unknown] == [
        ("k1", 1, "append_key", 1), ("k2", 2, "append_key", 1)]


def test_the_journal_migration_keeps_version_1_rows(tmp_path: Path) -> None:
    """Schema 1 -> 2 rebuilds the journal (a new status) and keeps every row."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO journal (key, task_id, run, step_index, tool, effect, status, started_at)"
               " VALUES ('k', 't1', 1, 0, 'append_key', 'effectful', 'started', 'then')")
    db.close()
    store = Store(path)
    assert store.schema_version() == len(MIGRATIONS) >= 2
    assert store.journal("t1")["k"]["status"] == "started"
    assert [e["key"] for e in store.effects_unknown("t1", run_over=True)] == ["k"]


def _run_steps(store: Store, steps: int) -> list[int]:
    """Drive a task through ``steps`` tool steps, checkpointing as the task actor does; bytes after each."""
    plan = {"goal": "g", "steps": [{"index": i, "description": f"echo {i}", "action_type": "tool_call",
                                    "action_params": {"tool": "echo", "args": {"text": f"line {i}"}}}
                                   for i in range(steps)]}
    fsm = new_task(store)
    checkpointer = Checkpointer(fsm.snapshot())
    sizes = []
    for event, payload in [("TASK_CREATED", {}), ("PERCEIVE_DONE", {}), ("THINK_DONE", {}), ("PLAN_DONE", {"plan": plan})]:
        source = fsm.state
        fsm.transition(event, **payload)
        kind = kind_for(fsm.state, event)
        store.cognitive_transition("t1", 1, "classic", source, fsm.state, event, None,
                                   (kind, checkpointer.make(kind, fsm.snapshot())) if kind else None, None)
    for i in range(steps):
        source = fsm.state
        result = {"step_index": i, "success": True, "tool": "echo", "output": f"line {i}", "duration_ms": 0.1}
        fsm.transition("TOOL_CALL_COMPLETED", result=result)
        kind = kind_for(fsm.state, "TOOL_CALL_COMPLETED")
        store.cognitive_transition("t1", 1, "classic", source, fsm.state, "TOOL_CALL_COMPLETED",
                                   {"stage": "act"}, (kind, checkpointer.make(kind, fsm.snapshot())), None)
        sizes.append(store.bytes_for("t1"))
    rebuilt = rebuild("t1", store.checkpoints("t1"))
    assert rebuilt.context == fsm.context and rebuilt.state == fsm.state
    return sizes


def test_bytes_per_step_stay_flat_over_200_steps(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    sizes = _run_steps(store, 200)
    per_step = [b - a for a, b in zip(sizes, sizes[1:])]
    early, late = sum(per_step[:50]) / 50, sum(per_step[-50:]) / 50
    print(f"\nbytes per step: first 50 avg {early:.1f}, last 50 avg {late:.1f}, total {sizes[-1]} bytes")
    # Digits grow (step 9 -> 199); anything O(n) per step would be ~100x here.
    assert late <= early * 1.25


def test_checkpoints_rebuild_from_the_last_full_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    fsm = new_task(store)
    checkpointer = Checkpointer(fsm.snapshot())
    fsm.transition("TASK_CREATED")
    fsm.transition("PERCEIVE_DONE")
    fsm.transition("TASK_SUSPENDED", reason="hold")
    store.add_checkpoint("t1", 1, "full", fsm.state, checkpointer.make("full", fsm.snapshot()))
    fsm.transition("TASK_RESUMED", message="go on")
    store.add_checkpoint("t1", 1, "delta", fsm.state, checkpointer.make("delta", fsm.snapshot()))
    rows = store.checkpoints("t1")
    assert [r.kind for r in rows] == ["full", "delta"]  # the creation checkpoint is behind the newer full one
    snapshot = rebuild("t1", rows)
    assert snapshot.state == "thinking" and snapshot.context.messages[-1]["content"] == "go on"


def test_a_corrupt_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    fsm = new_task(store)
    store.add_checkpoint("t1", 1, "delta", "perceiving", b"\x00garbage")
    with pytest.raises(CorruptCheckpoint, match=r"checkpoint \d+ of task t1 is unreadable"):
        rebuild("t1", store.checkpoints("t1"))
    store.db.execute("UPDATE checkpoints SET data = ? WHERE kind = 'full'", (b"\xffnope",))
    with pytest.raises(CorruptCheckpoint, match="unreadable"):
        rebuild("t1", store.checkpoints("t1"))
    assert fsm.state == "idle"


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(old=json_values, new=json_values)
def test_a_delta_rebuilds_the_new_value(old, new) -> None:
    assert delta.apply(old, delta.diff(old, new)) == new


def test_an_appended_result_is_a_small_delta() -> None:
    old = {"actions_done": [{"i": n} for n in range(100)], "plan": {"steps": [{"completed": False}] * 100}}
    new = {"actions_done": old["actions_done"] + [{"i": 100}],
           "plan": {"steps": [{"completed": True}] + [{"completed": False}] * 99}}
    assert delta.diff(old, new) == {"k": {"actions_done": {"+": [{"i": 100}]},
                                          "plan": {"k": {"steps": {"i": {"0": {"k": {"completed": {"=": True}}}}}}}}}


def test_rows_are_read_by_column_name_not_position(tmp_path: Path) -> None:
    """Regression: rows were read with SELECT * and zipped by position, so a migration that rebuilt a
    table with its columns in another order would have mixed fields up (a task's input read as its source)."""
    store = Store(tmp_path / "p.db")
    store.create_task({"task_id": "t1", "machine": "classic", "cognitive_state": "idle", "priority": 3, "seq": 1,
                       "input": "the input", "source": "cli", "metadata": {"k": 1}}, b"")
    store.close()
    db = sqlite3.connect(tmp_path / "p.db")
    columns = [row[1] for row in db.execute("PRAGMA table_info(tasks)")]
    shuffled = list(reversed(columns))
    db.executescript(f"""
        CREATE TABLE tasks_shuffled AS SELECT {', '.join(shuffled)} FROM tasks;
        DROP TABLE tasks;
        ALTER TABLE tasks_shuffled RENAME TO tasks;
        CREATE INDEX tasks_by_state ON tasks (lifecycle_state);
    """)
    db.close()
    row = Store(tmp_path / "p.db").task_row("t1")
    assert row is not None
    assert (row["input"], row["source"], row["priority"], row["metadata"]) == ("the input", "cli", 3, {"k": 1})


def test_a_full_checkpoint_past_the_unpackers_default_buffer_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """msgpack's Unpacker refuses more than its max_buffer_size (100 MiB by default) with BufferFull: the buffer
    is the checkpoint's size, and a feed that fails is None (archive_task falls back), never an exception."""
    import functools

    import msgpack

    fsm = TaskFSM.create("classic", "count things", task_id="t1")
    fsm.context.messages.append({"role": "user", "content": "a" * 5000})
    full = encode_full(fsm.snapshot())
    small = functools.partial(msgpack.Unpacker, max_buffer_size=1024)  # the default, scaled down to be cheap
    monkeypatch.setattr(checkpoint.msgpack, "Unpacker", small)
    assert full_context(full) is not None
    monkeypatch.setattr(checkpoint.msgpack, "Unpacker", lambda **k: small(**{**k, "max_buffer_size": 1024}))
    assert full_context(full) is None
