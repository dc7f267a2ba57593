"""Recovery from the store: a new Admission on the same database brings every unfinished task back."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from pegasus.admission import Admission, RunGate, StartRun
from pegasus.config import Settings
from pegasus.store import Checkpointer, Store, kind_for
from pegasus.task import InvalidStateTransition, TaskFSM


def admission_on(path: Path, **overrides) -> Admission:
    counter = itertools.count(1)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    return Admission(settings, id_factory=lambda: f"t{next(counter)}-{path.name}", store=Store(path / "p.db"))


def run_until(store: Store, snapshot, events) -> None:
    """Play a task's run as its task actor would: transitions and checkpoints into the store."""
    fsm = TaskFSM.restore(snapshot)
    checkpointer = Checkpointer(snapshot)
    for event, payload in events:
        source = fsm.state
        fsm.transition(event, **payload)
        kind = kind_for(fsm.state, event)
        store.cognitive_transition(fsm.task_id, 1, "classic", source, fsm.state, event, None,
                                   (kind, checkpointer.make(kind, fsm.snapshot())) if kind else None, None)


PLAN = {"goal": "g", "steps": [{"index": 0, "description": "echo", "action_params": {"tool": "echo", "args": {}}},
                               {"index": 1, "description": "respond", "action_type": "respond"}]}


def test_states_priorities_and_queue_order_survive_a_restart(tmp_path: Path) -> None:
    first = admission_on(tmp_path, runtime={"approval_policy": "manual", "max_active_tasks": 1})
    draft, _ = first.submit("stay a draft", "classic", 7, {"k": "v"}, "t")
    running, _ = first.submit("running", "classic", 5, {}, "t")
    first.approve(running.task_id)
    low, _ = first.submit("queued low", "classic", 9, {}, "t")
    first.approve(low.task_id)
    high, _ = first.submit("queued high", "reason_act", 1, {}, "t")
    first.approve(high.task_id)
    run_until(first.store, running.snapshot, [("TASK_CREATED", {}), ("PERCEIVE_DONE", {}), ("THINK_DONE", {}),
                                              ("PLAN_DONE", {"plan": PLAN})])
    assert {r.task_id: r.state for r in first.records.values()} == {
        draft.task_id: "draft", running.task_id: "running", low.task_id: "queued", high.task_id: "queued"}

    second = admission_on(tmp_path, runtime={"approval_policy": "manual", "max_active_tasks": 1})
    effects = second.restore()
    restored = second.records
    assert {tid: (r.state, r.priority, r.machine) for tid, r in restored.items()} == {
        draft.task_id: ("draft", 7, "classic"), running.task_id: ("running", 5, "classic"),
        low.task_id: ("queued", 9, "classic"), high.task_id: ("queued", 1, "reason_act")}
    [start] = [e for e in effects if isinstance(e, StartRun)]
    assert start.task_id == running.task_id and start.run == 2
    assert start.snapshot.state == "acting" and start.snapshot.context.plan is not None
    assert restored[draft.task_id].lifecycle.metadata == {"k": "v"}
    # The queue kept its order: when the running task ends, the high-priority one starts.
    fsm = TaskFSM.restore(start.snapshot)
    fsm.transition("TASK_FAILED", error="x")
    follow = second.on_stopped(running.task_id, 2, "failed", fsm.snapshot(), "exception")
    assert [e.task_id for e in follow if isinstance(e, StartRun)] == [high.task_id]


def test_suspended_tasks_stay_suspended_and_resume_from_the_store(tmp_path: Path) -> None:
    first = admission_on(tmp_path)
    task, _ = first.submit("help me", "classic", 2, {}, "t")
    run_until(first.store, task.snapshot, [("TASK_CREATED", {}), ("PERCEIVE_DONE", {}),
                                           ("NEED_MORE_INFO", {"question": "which file?"})])
    fsm = TaskFSM.restore(task.snapshot)
    for event in ("TASK_CREATED", "PERCEIVE_DONE"):
        fsm.transition(event)
    fsm.transition("NEED_MORE_INFO", question="which file?")
    first.on_stopped(task.task_id, 1, "suspended", fsm.snapshot(), None)

    second = admission_on(tmp_path)
    assert [e for e in second.restore() if isinstance(e, StartRun)] == []
    record = second.get(task.task_id)
    assert (record.state, record.snapshot.state, record.priority) == ("blocked", "suspended", 2)
    assert record.snapshot.context.suspend_reason == "which file?"
    [start] = [e for e in second.resume(task.task_id, "README.md") if isinstance(e, StartRun)]
    assert (start.resume_event, start.resume_payload) == ("MESSAGE_RECEIVED", {"text": "README.md"})


def test_verifying_tasks_run_their_gates_again_and_verified_ones_finish(tmp_path: Path) -> None:
    gates = {"gates": [{"name": "g", "command": ["true"]}]}
    first = admission_on(tmp_path, verification=gates)
    task, _ = first.submit("echo hi", "classic", 5, {}, "t")
    fsm = TaskFSM.restore(task.snapshot)
    fsm.transition("TASK_CREATED")
    fsm.transition("TASK_FAILED", error="x")  # any end will do to reach a stopped run
    fsm2 = TaskFSM.restore(task.snapshot)
    for event, payload in (("TASK_CREATED", {}), ("PERCEIVE_DONE", {}), ("THINK_DONE", {}),
                           ("PLAN_DONE", {"plan": PLAN}), ("TOOL_CALL_COMPLETED", {"result": {"step_index": 0, "success": True}}),
                           ("TOOL_CALL_COMPLETED", {"result": {"step_index": 1, "success": True}}),
                           ("REFLECT_DONE", {"verdict": "complete", "final_result": "hi"})):
        fsm2.transition(event, **payload)
    first.store.add_checkpoint(task.task_id, 1, "full", "completed", Checkpointer(fsm2.snapshot()).make("full", fsm2.snapshot()))
    assert any(isinstance(e, RunGate) for e in first.on_stopped(task.task_id, 1, "completed", fsm2.snapshot(), None))
    second = admission_on(tmp_path, verification=gates)
    [gate] = [e for e in second.restore() if isinstance(e, RunGate)]
    assert gate.task_id == task.task_id and second.get(task.task_id).state == "verifying"


def test_a_corrupt_checkpoint_fails_only_its_task(tmp_path: Path) -> None:
    first = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    bad, _ = first.submit("bad", "classic", 5, {}, "t")
    good, _ = first.submit("good", "classic", 5, {}, "t")
    first.store.db.execute("UPDATE checkpoints SET data = ? WHERE task_id = ?", (b"\x00broken", bad.task_id))
    second = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    effects = second.restore()
    failed = second.get(bad.task_id)
    assert (failed.state, failed.exit_reason) == ("failed", "fatal_error")
    assert "unreadable" in failed.error
    assert [e.task_id for e in effects if isinstance(e, StartRun)] == [good.task_id]
    assert second.store.task_row(bad.task_id)["exit_reason"] == "fatal_error"


def test_a_corrupt_checkpoint_of_a_queued_task_fails_it_by_legal_moves(tmp_path: Path) -> None:
    first = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    first.submit("runs", "classic", 5, {}, "t")
    queued, _ = first.submit("waits", "classic", 5, {}, "t")
    first.store.db.execute("UPDATE checkpoints SET data = ? WHERE task_id = ?", (b"\x00", queued.task_id))
    second = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    second.restore()
    assert second.get(queued.task_id).state == "failed"
    path = [(a["payload"]["from_state"], a["payload"]["to_state"]) for a in second.store.audit(queued.task_id)[1:]]
    assert path[-2:] == [("queued", "running"), ("running", "failed")]


def test_finished_tasks_leave_memory_only_when_the_store_keeps_them(tmp_path: Path) -> None:
    durable = admission_on(tmp_path)
    task, _ = durable.submit("echo hi", "classic", 5, {}, "t")
    fsm = TaskFSM.restore(task.snapshot)
    for event, payload in (("TASK_CREATED", {}), ("PERCEIVE_DONE", {}), ("THINK_DONE", {}), ("PLAN_DONE", {"plan": PLAN}),
                           ("ACT_DONE", {}), ("REFLECT_DONE", {"verdict": "complete", "final_result": "hi"})):
        fsm.transition(event, **payload)
    durable.on_stopped(task.task_id, 1, "completed", fsm.snapshot(), None)
    assert task.task_id not in durable.records
    assert durable.get(task.task_id).state == "done"  # read back from the store
    assert durable.counts() == {"done": 1}
    from pegasus.admission import Admission
    volatile = Admission(Settings())  # NullStore: nothing else remembers it
    kept, _ = volatile.submit("echo hi", "classic", 5, {}, "t")
    volatile.cancel(kept.task_id, "x")
    assert kept.task_id in volatile.records and volatile.counts() == {"canceled": 1}


def test_a_task_row_restore_cannot_follow_is_quarantined_not_raised(tmp_path: Path) -> None:
    """A task whose machine no version knows (a removed plugin, a bug): on 8f3b2f9 the start failed with
    ``unknown machine`` (and so did every restart); now it is failed with its error, noted as quarantined, the
    other tasks restored, and the next start does not meet it again."""
    first = admission_on(tmp_path)
    good, _ = first.submit("what is 2 + 2?", "classic", 5, {}, "cli")
    with sqlite3.connect(tmp_path / "p.db") as db:
        db.execute("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, "
                   "source, created_at, updated_at) VALUES ('bad', 'gone_machine', 'queued', 'received', 5, 99, 'x', "
                   "'cli', 'then', 'then')")
    again = admission_on(tmp_path)
    again.restore()
    assert good.task_id in again.records and "bad" not in again.records
    assert "unknown machine 'gone_machine'" in again.quarantined["bad"]
    row = again.store.task_row("bad")
    assert (row["lifecycle_state"], row["exit_reason"]) == ("failed", "fatal_error")
    assert row["error"].startswith("quarantined: ")
    third = admission_on(tmp_path)
    third.restore()
    assert third.quarantined == {} and good.task_id in third.records


def _failed_before_a_restart(path: Path, **overrides) -> tuple[Admission, str]:
    """A task failed under one Admission; a second one on the same database, restored (a new start)."""
    first = admission_on(path, **overrides)
    task, _ = first.submit("fail once", "classic", 5, {}, "t")
    fsm = TaskFSM.restore(task.snapshot)
    fsm.transition("TASK_CREATED")
    fsm.transition("TASK_FAILED", error="boom")
    first.on_stopped(task.task_id, 1, fsm.state, fsm.snapshot(), "exception")
    first.store.close()
    again = Admission(first.settings, clock=lambda: 1000.0, store=Store(path / "p.db"))
    again.restore()
    assert task.task_id not in again.records and again.get(task.task_id).state == "failed"  # only the store has it
    return again, task.task_id


def test_a_task_failed_before_a_restart_is_retried_at_once(tmp_path: Path) -> None:
    """Issue 28: its queue entry named a record only the store had; the slot-filling raised KeyError."""
    admission, task_id = _failed_before_a_restart(tmp_path, retry={"backoff_s": 0})
    started = [e for e in admission.retry(task_id) if isinstance(e, StartRun)]
    assert [e.task_id for e in started] == [task_id] and started[0].snapshot.state == "idle"
    assert admission.running == {task_id} and admission.records[task_id].attempts == 2
    assert admission.store.task_row(task_id)["lifecycle_state"] == "running"


def test_a_task_failed_before_a_restart_is_retried_after_its_backoff(tmp_path: Path) -> None:
    admission, task_id = _failed_before_a_restart(tmp_path, retry={"backoff_s": 2})
    clock = [1000.0]
    admission.clock = lambda: clock[0]
    assert not any(isinstance(e, StartRun) for e in admission.retry(task_id))
    clock[0] += 2
    assert [e.task_id for e in admission.wake(task_id) if isinstance(e, StartRun)] == [task_id]


def test_every_other_request_on_a_task_failed_before_a_restart_is_refused_cleanly(tmp_path: Path) -> None:
    """Approve, suspend, resume, message and cancel read it from the store and refuse a failed task; the tree
    shows it; none of them leaves it in memory (only a retry, which moves it, does)."""
    admission, task_id = _failed_before_a_restart(tmp_path)
    for request in (lambda: admission.approve(task_id), lambda: admission.suspend(task_id, "r"),
                    lambda: admission.resume(task_id, None), lambda: admission.message(task_id, "hi"),
                    lambda: admission.cancel(task_id, "r")):
        with pytest.raises(InvalidStateTransition):
            request()
    assert admission.tree.subtree(task_id)["lifecycle_state"] == "failed"
    assert task_id not in admission.records and admission.store.task_row(task_id)["lifecycle_state"] == "failed"
