"""The post-task reflector's durable rows (issue 19): pending until an answer commits, counted hand-outs,
the done-marker and the memory writes in one transaction, REFLECTION_COMPLETE / _FAILED in the audit log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pegasus.config import MemorySettings
from pegasus.memory import MemoryCapExceeded, MemoryStore
from pegasus.store import Store
from pegasus.store import reflections as r
from pegasus.store.checkpoint import encode_full
from pegasus.store.schema import MIGRATIONS
from pegasus.task import TaskFSM

WALK = [("draft", "approved"), ("approved", "queued"), ("queued", "running"), ("running", "verifying"),
        ("verifying", "verified"), ("verified", "done")]


def done_task(store: Store, task_id: str, seq: int = 1, state: str = "done") -> None:
    fsm = TaskFSM.create("classic", "x", task_id=task_id)
    store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                       "seq": seq, "input": "x", "source": "test"}, encode_full(fsm.snapshot()))
    for source, target in WALK:
        store.lifecycle_transition(task_id, source, target, "E", actor="test", reason="")
        if target == state:
            return


def test_a_done_task_is_pending_until_its_reflection_commits(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    done_task(store, "t1", 1)
    done_task(store, "t2", 2, state="running")  # not done: not reflected
    assert r.pending(store) == [("t1", 0)]
    assert (r.started(store, "t1"), r.started(store, "t1")) == (1, 2)  # hand-outs counted
    assert r.pending(store) == [("t1", 2)]  # handed out, no answer committed: still pending (a crash runs it again)
    written = r.finished(store, "t1", r.COMPLETE, reflection={"facts": [], "assessment": "fine"},
                         write=lambda: ["episode:1"])
    assert written == ["episode:1"] and r.pending(store) == []
    row = r.reflection_of(store, "t1")
    assert row is not None and (row["status"], row["attempts"], row["reflection"]["assessment"]) == (
        "complete", 2, "fine")
    audit = store.audit("t1")[-1]
    assert (audit["event_type"], audit["payload"]["memories"]) == ("REFLECTION_COMPLETE", ["episode:1"])


def test_memory_writes_that_fail_leave_no_done_marker(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    done_task(store, "t1")

    def refused() -> list[str]:
        store.db.execute("INSERT INTO meta (name, value) VALUES ('written', 'yes')")  # a write that must not stay
        raise ValueError("[memory] facts_max_bytes")

    with pytest.raises(ValueError):
        r.finished(store, "t1", r.COMPLETE, reflection={}, write=refused)
    assert r.pending(store) == [("t1", 0)] and store._query("SELECT * FROM meta WHERE name = 'written'", ()) == []
    r.finished(store, "t1", r.FAILED, error="refused: [memory] facts_max_bytes")
    row = r.reflection_of(store, "t1")
    assert row is not None and (row["status"], row["error"]) == ("failed", "refused: [memory] facts_max_bytes")
    assert store.audit("t1")[-1]["event_type"] == "REFLECTION_FAILED" and r.pending(store) == []


def test_tasks_done_before_the_upgrade_are_not_reflected(tmp_path: Path) -> None:
    index = next(i for i, step in enumerate(MIGRATIONS) if any("post_reflections" in s for s in step))
    db = sqlite3.connect(tmp_path / "p.db")  # a store of the schema before the reflector, one task done in it
    for step in MIGRATIONS[:index]:
        for statement in step:
            db.execute(statement)
    db.execute("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, source,"
               " created_at, updated_at) VALUES ('t1', 'classic', 'done', 'completed', 3, 1, 'x', 'cli', 'now', 'now')")
    db.execute(f"PRAGMA user_version = {index}")
    db.commit()
    db.close()
    store = Store(tmp_path / "p.db")  # migrated: t1 is marked skipped, never reflected
    row = r.reflection_of(store, "t1")
    assert r.pending(store) == [] and row is not None and row["status"] == "skipped"


def test_the_memory_stores_own_writes_nest_in_the_marker_and_a_refused_one_undoes_them_all(tmp_path: Path) -> None:
    """Regression: the memory store's transactions inside the marker's failed ('cannot start a transaction
    within a transaction'), so no reflection ever committed on a real system."""
    store = Store(tmp_path / "p.db")
    memory = MemoryStore(store, MemorySettings(facts_max_bytes=60))
    done_task(store, "t1")
    written = r.finished(store, "t1", r.COMPLETE, reflection={}, write=lambda: [
        memory.write_fact("deploy-key", "The deploy key is in the vault.", task_id="t1").id,
        memory.add_episode("t1", "remember it", "kept").id])
    assert written == ["fact:deploy-key@1", "episode:1"] and r.pending(store) == []
    done_task(store, "t2", 2)
    with pytest.raises(MemoryCapExceeded, match=r"\[memory\] facts_max_bytes"):
        r.finished(store, "t2", r.COMPLETE, reflection={}, write=lambda: [
            memory.add_episode("t2", "second", "kept").id,
            memory.write_fact("vault", "The vault is in the basement of the old building.", task_id="t2").id])
    assert [e.task_id for e in memory.episodes()] == ["t1"] and r.pending(store) == [("t2", 0)]  # nothing of t2


@pytest.mark.parametrize("status", [r.SKIPPED, r.FAILED])
def test_a_marker_alone_in_a_group_is_one_statement_and_flushes_nothing(tmp_path: Path, status: str) -> None:
    """The reflector off (the issue's workload): every done task writes a ``skipped`` marker in the group that
    ends it.  Before, that was a savepoint that wrote the group's waiting rows first and forgot the lifecycle
    states known in it (the next task's start compared in the file again): SAVEPOINT, RELEASE, and one
    statement a table of waiting rows, mid-group."""
    store = Store(tmp_path / "p.db")
    done_task(store, "t1", 1, state="verified")
    seen: list[str] = []
    store.db.set_trace_callback(lambda sql: seen.append(sql) if not sql.startswith("--") else None)
    with store.group():
        store.lifecycle_transition("t1", "verified", "done", "E", actor="test", reason="")
        r.finished(store, "t1", status, error="[memory] reflector is off")
        assert [sql.split()[0] for sql in seen] == ["BEGIN", "UPDATE", "INSERT"]  # the move's compare, the marker
        assert store.pending.lifecycle == {"t1": "done"} and store.pending.transitions
    assert not [sql for sql in seen if sql.startswith(("SAVEPOINT", "RELEASE"))]
    assert r.pending(store) == []
    audit = [row[0] for row in store.db.execute("SELECT event_type FROM audit WHERE task_id = 't1' ORDER BY rowid")]
    assert audit[-1] == ("REFLECTION_FAILED" if status == r.FAILED else "STATE_TRANSITION_DONE")


def test_a_reflection_with_memories_leaves_the_groups_waiting_rows_waiting(tmp_path: Path) -> None:
    """The reflector on (``scale``): a done task's answer writes its episode and marker in a savepoint of the group
    that also holds other tasks' moves.  Before, that savepoint wrote the waiting rows first, mid-group (one
    statement a table), wrote its audit row on its own, and forgot the lifecycle states known, so the next move of
    a task moved earlier in the group was compared in the file again (an UPDATE).  Now: no statement on the
    waiting rows' tables until the commit, and the audit rows there in the order they were made."""
    store = Store(tmp_path / "p.db")
    memory = MemoryStore(store, MemorySettings())
    done_task(store, "t1", 1)
    done_task(store, "t2", 2, state="running")
    seen: list[str] = []
    store.db.set_trace_callback(lambda sql: seen.append(sql) if not sql.startswith("--") else None)
    with store.group():
        store.lifecycle_transition("t2", "running", "verifying", "E", actor="test", reason="")
        r.finished(store, "t1", r.COMPLETE, reflection={"assessment": "fine"},
                   write=lambda: [memory.add_episode("t1", "remember it", "kept").id])
        store.lifecycle_transition("t2", "verifying", "verified", "E", actor="test", reason="")
        waiting = [sql for sql in seen if sql.split()[0] in ("INSERT", "UPDATE") and
                   any(f" {table} " in f"{sql} " for table in ("tasks", "transitions", "audit", "checkpoints"))]
        assert [sql.split()[0] for sql in waiting] == ["UPDATE"]  # t2's first move: its compare-and-set
        assert store.pending.lifecycle["t2"] == "verified" and len(store.pending.audit) == 3
    assert [row[0] for row in store.db.execute("SELECT event_type FROM audit ORDER BY rowid")][-3:] == [
        "STATE_TRANSITION_VERIFYING", "REFLECTION_COMPLETE", "STATE_TRANSITION_VERIFIED"]
    assert r.pending(store) == [] and [e.task_id for e in memory.episodes()] == ["t1"]


def test_a_refused_reflection_in_a_group_keeps_the_rows_that_waited_before_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    done_task(store, "t1", 1)
    done_task(store, "t2", 2, state="running")

    def refused() -> list[str]:
        store.db.execute("INSERT INTO meta (name, value) VALUES ('written', 'yes')")
        store.pending.audit.append(("x", "t1", "E", "{}", "now"))  # a row it left waiting goes with it
        raise ValueError("[memory] facts_max_bytes")

    with store.group():
        store.lifecycle_transition("t2", "running", "verifying", "E", actor="test", reason="")
        with pytest.raises(ValueError):
            r.finished(store, "t1", r.COMPLETE, reflection={}, write=refused)
        store.lifecycle_transition("t2", "verifying", "verified", "E", actor="test", reason="")
    assert store._query("SELECT * FROM meta WHERE name = 'written'", ()) == [] and r.pending(store) == [("t1", 0)]
    assert store.task_row("t2")["lifecycle_state"] == "verified"
    assert [row[0] for row in store.db.execute("SELECT event_type FROM audit WHERE task_id = 't1' ORDER BY rowid")
            ][-1] == "STATE_TRANSITION_DONE"
