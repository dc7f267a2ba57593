"""A task's transition rows wait for the end of their transaction (``pegasus.store.pending``): fewer
statements, the same rows committed, reads and failed writes in between as before."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from pegasus.store import StaleStateError, Store, StoreError
from benchmarks.checkpoint import Calls
from pegasus.store.checkpoint import encode_full
from pegasus.store.journal import FINISHED, StepEnd
from pegasus.store.tree import Link
from pegasus.task import TaskFSM
from tests.pegasus.store.test_store import new_task


def traced(store: Store) -> list[str]:
    """The statements the store's connection runs from now on (not those FTS5 runs inside them)."""
    seen: list[str] = []
    store.db.set_trace_callback(lambda sql: seen.append(sql) if not sql.startswith("--") else None)
    return seen


def test_a_second_compare_and_set_in_one_transaction_is_answered_from_the_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    seen = traced(store)
    with store.group():
        store.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="a", reason="r")
        store.lifecycle_transition("t1", "approved", "queued", "TASK_QUEUED", actor="a", reason="r",
                                   updates={"attempts": 2})
        with pytest.raises(StaleStateError) as stale:  # still compared: with what this transaction left
            store.lifecycle_transition("t1", "approved", "queued", "TASK_QUEUED", actor="a", reason="r")
        assert stale.value.actual == "queued"
        store.lifecycle_transition("t1", "queued", "running", "TASK_STARTED", actor="a", reason="r", run=1)
    updates = [s for s in seen if s.startswith("UPDATE tasks")]
    assert len(updates) == 2  # the first compare-and-set, then the row as the last move left it
    assert sum(s.startswith(("INSERT INTO transitions", "INSERT INTO audit")) for s in seen) == 6
    assert not any(s.startswith(("SAVEPOINT", "RELEASE")) for s in seen)
    row = store.task_row("t1")
    assert (row["lifecycle_state"], row["attempts"], row["runs"]) == ("running", 2, 0)
    assert [t["to_state"] for t in store.transitions("t1")] == ["draft", "approved", "queued", "running"]
    assert [a["event_type"] for a in store.audit("t1")][1:] == [
        "STATE_TRANSITION_APPROVED", "STATE_TRANSITION_QUEUED", "STATE_TRANSITION_RUNNING"]
    store.db.execute("CREATE TRIGGER refuse BEFORE UPDATE ON tasks BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with store.group():  # a compare-and-set that fails in a group: the store's error, the rest committed
        store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "TASK_CREATED", None, None, None)
        with pytest.raises(StoreError, match="refused"):
            store.lifecycle_transition("t1", "running", "verifying", "EXECUTION_COMPLETE", actor="a", reason="r")
        store.db.execute("DROP TRIGGER refuse")
    assert [t["event"] for t in store.transitions("t1")][-1] == "TASK_CREATED"
    assert store.task_row("t1")["lifecycle_state"] == "running"
    store.close()


def test_a_reports_rows_wait_for_the_commit_and_a_read_or_a_failed_write_between_sees_them(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    store = Store(path)
    new_task(store)
    other = sqlite3.connect(path)  # another process's view: only what is committed
    seen = traced(store)
    store.hold()
    store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "TASK_CREATED", None, None, None)
    store.cognitive_transition("t1", 1, "classic", "perceiving", "thinking", "PERCEIVE_DONE", {"stage": "perceive"},
                               None, None)
    assert not any(s.startswith(("INSERT", "UPDATE")) for s in seen)  # waiting, not written
    assert [t["event"] for t in store.transitions("t1")][-2:] == ["TASK_CREATED", "PERCEIVE_DONE"]  # read sees them
    store.cognitive_transition("t1", 1, "classic", "thinking", "planning", "THINK_DONE", None, None,
                               StepEnd("k1", FINISHED, b"r", 0, "echo", "effectful"))
    with pytest.raises(RuntimeError), store.transaction() as db:  # a write that fails: its own rows go, no others
        db.execute("INSERT INTO meta (name, value) VALUES ('x', 'y')")
        raise RuntimeError("the write failed")
    assert other.execute("SELECT COUNT(*) FROM transitions WHERE machine = 'classic'").fetchone() == (0,)
    store.release()
    assert other.execute("SELECT event FROM transitions WHERE machine = 'classic' ORDER BY id").fetchall() == [
        ("TASK_CREATED",), ("PERCEIVE_DONE",), ("THINK_DONE",)]
    assert other.execute("SELECT cognitive_state FROM tasks").fetchone() == ("planning",)
    assert other.execute("SELECT status FROM journal WHERE key = 'k1'").fetchone() == ("finished",)
    assert other.execute("SELECT COUNT(*) FROM meta WHERE name = 'x'").fetchone() == (0,)
    assert sum(s.startswith("UPDATE tasks") for s in seen) == 2  # one per flush: before the read, at the commit
    other.close()
    store.close()


def test_rows_left_waiting_by_a_rolled_back_group_are_never_written(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    new_task(store)
    seen = traced(store)
    store.hold()
    store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "TASK_CREATED", None, None, None)
    store.release(commit=False)
    assert not store.pending and not any(s.startswith("INSERT") for s in seen)
    store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "TASK_CREATED", None, None, None)
    assert [t["event"] for t in store.transitions("t1")] == ["TASK_CREATED", "TASK_CREATED"]  # lifecycle + this
    with pytest.raises(StoreError):  # a NOT NULL column missing: refused before anything waits
        store.cognitive_transition("t1", 1, "classic", None, "thinking", "PERCEIVE_DONE", None, None, None)  # type: ignore[arg-type]
    assert not store.pending
    with pytest.raises(StoreError, match="CHECK"):  # a row the file refuses at the flush: the commit fails whole
        store.cognitive_transition("t1", 1, "classic", "perceiving", "thinking", "PERCEIVE_DONE", None,
                                   ("neither", b"x"), None)
    assert not store.db.in_transaction and not store.pending  # no transaction stays open
    assert [t["event"] for t in store.transitions("t1")][-1] == "TASK_CREATED"
    store.close()


def _parent_and_child(store: Store) -> None:
    """Task "parent", and "child" created with its link to it (a sub-task)."""
    new_task(store, "parent")
    fsm = TaskFSM.create("classic", "a part", task_id="child")
    store.create_task({"task_id": "child", "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                       "seq": 2, "input": "a part", "source": "test", "link": Link("child", "parent", 1, "k", 0)},
                      encode_full(fsm.snapshot()))


def test_a_task_created_here_with_no_link_is_answered_without_a_read(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    _parent_and_child(store)
    seen = traced(store)
    assert store.link_of("parent") is None and seen == []  # its end asks: no subtasks read
    assert store.link_of("child") == Link("child", "parent", 1, "k", 0)
    assert store.link_of("parent") is None and len(seen) == 2  # asked again: read, the same answer
    store.close()
    assert Store(tmp_path / "p.db").link_of("child") is not None  # another store (a restart) reads it


def test_a_groups_plain_submits_make_one_statement_a_table_and_no_savepoint(tmp_path: Path) -> None:
    """Submitted together (``SubmitMany``, a batch of starts): 20 tasks, each created, approved and queued.
    Before, each creation was a savepoint that wrote what waited: 20 SAVEPOINTs and RELEASEs, 20 calls
    INSERTing into tasks and into task_search, 20 executemany a table of history rows."""
    store = Store(tmp_path / "p.db")
    seen = traced(store)
    calls = Calls(store.db)
    store.db = calls  # type: ignore[assignment]
    with store.group():
        for n in range(20):
            task_id = f"t{n:02}"
            fsm = TaskFSM.create("classic", f"task {n}", task_id=task_id)
            store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                               "seq": n, "input": f"task {n}", "source": "test", "metadata": {"team": "a"}},
                              encode_full(fsm.snapshot()))
            store.lifecycle_transition(task_id, "draft", "approved", "TASK_APPROVED", actor="a", reason="r")
            store.lifecycle_transition(task_id, "approved", "queued", "TASK_QUEUED", actor="a", reason="r")
        assert not [sql for sql in seen if sql.startswith("INSERT")]  # every row waits for the commit
    store.db = calls._db
    assert not [sql for sql in seen if sql.startswith(("SAVEPOINT", "RELEASE"))]
    for kind in ("INSERT tasks", "INSERT task_search", "INSERT task_meta", "INSERT transitions", "INSERT audit",
                 "INSERT checkpoints", "UPDATE tasks"):
        assert calls.calls[kind] == 1, kind  # one executemany a table
    rows = store.db.execute("SELECT t.task_id, t.lifecycle_state, s.input, m.value FROM tasks t JOIN task_search s"
                            " ON s.rowid = t.rowid JOIN task_meta m ON m.task_id = t.task_id ORDER BY 1").fetchall()
    assert rows == [(f"t{n:02}", "queued", f"task {n}", "a") for n in range(20)]
    assert store.db.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 60
    assert store.db.execute("SELECT COUNT(*) FROM transitions").fetchone()[0] == 60
    assert store.db.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] == 20


def test_an_audit_row_makes_no_system_call_for_its_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight audit rows a classic task: each drew ``os.urandom`` (a ``getrandom`` system call) before."""
    store = Store(tmp_path / "p.db")
    new_task(store)
    drawn: list[int] = []
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: drawn.append(n) or real(n))
    with store.group():
        store.lifecycle_transition("t1", "draft", "approved", "TASK_APPROVED", actor="a", reason="r")
        store.lifecycle_transition("t1", "approved", "queued", "TASK_QUEUED", actor="a", reason="r")
    assert drawn == []
    ids = [row[0] for row in store.db.execute("SELECT audit_id FROM audit ORDER BY rowid")]
    assert len(ids) == len(set(ids)) == 3 and all(len(i) == 32 for i in ids)


def test_a_plain_submit_lacking_a_column_fails_alone_and_the_groups_other_rows_commit(tmp_path: Path) -> None:
    """Its rows would wait for the group's commit: a NOT NULL column missing is refused at once, before they
    wait (else the commit failed and took every other task of the group with it)."""
    store = Store(tmp_path / "p.db")

    def row(task_id: str, machine: str | None) -> dict[str, object]:
        return {"task_id": task_id, "machine": machine, "cognitive_state": "perceive", "priority": 3, "seq": 1,
                "input": "x", "source": "test"}

    fsm = TaskFSM.create("classic", "x", task_id="good")
    with store.group():
        store.create_task(row("good", "classic"), encode_full(fsm.snapshot()))
        with pytest.raises(StoreError, match="'bad' lacks a column"):
            store.create_task(row("bad", None), encode_full(fsm.snapshot()))
    assert store.db.execute("SELECT task_id FROM tasks").fetchall() == [("good",)]


def test_whether_a_task_is_a_sub_task_leaves_the_unread_answer_of_its_end(tmp_path: Path) -> None:
    """A start asks whether a parent waits (``is_sub_task``); the task's end asks ``link_of`` after it, still
    answered without a read for a task created here with no link."""
    store = Store(tmp_path / "p.db")
    _parent_and_child(store)
    seen = traced(store)
    assert not store.is_sub_task("parent") and store.link_of("parent") is None and seen == []
    assert store.is_sub_task("child")
    store.close()
    again = Store(tmp_path / "p.db")  # a restart: nothing known unread, so both are read
    assert again.is_sub_task("child") and not again.is_sub_task("parent")
    again.close()
