"""Reports of one mailbox drain in one commit (pegasus.store.drain, ``Database.hold``): the policy and the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from pegasus.admission import Admission, StartRun
from pegasus.admission import inputs as i
from pegasus.config import Settings
from pegasus.store import Store, StoreError
from pegasus.store.checkpoint import encode_full
from pegasus.store.drain import DrainBatch, Hold, Linger, Settle
from pegasus.task import TaskFSM


def new_task(store: Store, task_id: str) -> None:
    fsm = TaskFSM.create("classic", "count things", task_id=task_id)
    store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                       "seq": 1, "input": "count things", "source": "test"}, encode_full(fsm.snapshot()))


def committed_tasks(path: Path) -> int:
    """What another process sees: only what is committed."""
    other = sqlite3.connect(path)
    try:
        return int(other.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])
    finally:
        other.close()


def test_reports_read_together_share_one_group_and_anything_else_settles_it_first() -> None:
    batch = DrainBatch()
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.after(next_batched=True) == []  # the next report already read: the group stays open
    assert batch.before(batched=True, can_hold=True) == []
    assert batch.after(next_batched=True) == []
    assert batch.before(batched=False, can_hold=True) == [Settle()]  # a request: committed before it is handled
    assert batch.after(next_batched=False) == []
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.after(next_batched=False) == [Settle()]  # nothing more read: committed now


def test_no_group_without_a_store_and_a_failed_store_rolls_back() -> None:
    batch = DrainBatch()
    assert batch.before(batched=True, can_hold=False) == []
    assert batch.after(next_batched=True) == []
    assert batch.failed() == []
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.failed() == [Settle(commit=False)]
    assert batch.after(next_batched=True) == []


def test_a_group_that_told_no_one_lingers_until_its_timer_and_one_timer_is_armed_at_a_time() -> None:
    batch = DrainBatch()
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.after(next_batched=False, sends_held=False, linger_s=0.02) == [Linger(0.02)]  # before: Settle
    assert batch.before(batched=True, can_hold=True) == []  # a report alone a moment later joins it
    assert batch.after(next_batched=False, sends_held=False, linger_s=0.02) == []  # the timer is on its way
    assert batch.before(batched=False, can_hold=True, lingered=True) == [Settle()]  # the timer commits both
    assert batch.after(next_batched=False) == []
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.after(next_batched=False, sends_held=False, linger_s=0.02) == [Linger(0.02)]
    assert batch.before(batched=True, can_hold=True) == []
    assert batch.after(next_batched=False, sends_held=True, linger_s=0.02) == [Settle()]  # a send waits: now
    assert batch.before(batched=False, can_hold=True, lingered=True) == []  # the timer finds nothing open
    assert batch.before(batched=True, can_hold=True) == [Hold()]
    assert batch.after(next_batched=False, sends_held=False, linger_s=0.0) == [Settle()]  # lingering off


STEP = st.tuples(st.sampled_from(["report", "other", "timer"]), st.booleans(), st.booleans(), st.booleans())


@given(st.lists(STEP, max_size=200), st.integers(1, 8), st.sampled_from([0.0, 0.02]))
def test_a_group_is_always_settled_and_never_holds_more_than_its_limit(
        steps: list[tuple[str, bool, bool, bool]], limit: int, linger_s: float) -> None:
    """Whatever comes: nothing but reports is handled inside a group, a group holds at most ``limit``, and one
    left open with nothing more read has its timer on the way (no report waits for a commit for good)."""
    batch = DrainBatch(limit)
    open_, held, timer = False, 0, False
    for kind, next_batched, fails, sends_held in steps:
        if kind == "timer" and not timer:
            continue  # only a Linger arms one
        timer = timer and kind != "timer"
        commands = batch.before(kind == "report", can_hold=True, lingered=kind == "timer")
        for command in commands:
            if isinstance(command, Hold):
                assert not open_
                open_, held = True, 0
            else:
                assert open_ and command == Settle()
                open_ = False
        if kind != "report":
            assert not open_  # nothing else is ever handled inside a group
        held += open_
        assert held <= limit
        if fails:
            assert batch.failed() == ([Settle(commit=False)] if open_ else [])
            open_ = False
        for command in batch.after(next_batched, sends_held, linger_s):
            assert open_
            if isinstance(command, Linger):
                assert not timer and not sends_held and linger_s
                timer = True
            else:
                assert command == Settle()
                open_ = False
        if open_ and not next_batched:
            assert timer and not sends_held and linger_s  # nothing left to read: its timer will commit it
        assert batch.open == open_


def test_a_held_group_commits_every_write_at_release_and_only_then(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    store.hold()
    assert store.holding
    new_task(store, "t1")
    with store.group():  # a report's own group joins the held one
        new_task(store, "t2")
    assert store.task_row("t2") is not None  # this connection reads its own writes
    assert committed_tasks(store.path) == 0
    with pytest.raises(StoreError):
        store.hold()
    store.release()
    assert not store.holding
    assert committed_tasks(store.path) == 2
    store.release()  # nothing open: nothing to do
    store.close()


def test_a_held_group_released_without_commit_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    store.hold()
    new_task(store, "t1")
    store.release(commit=False)
    assert committed_tasks(store.path) == 0
    assert store.task_row("t1") is None
    store.close()


class CountingStore(Store):
    journal_reads = 0

    def journal(self, task_id: str) -> dict:
        CountingStore.journal_reads += 1
        return super().journal(task_id)


def test_a_first_run_starts_without_reading_the_journal_and_a_later_one_reads_it(tmp_path: Path) -> None:
    settings = Settings.model_validate({"runtime": {"approval_policy": "auto"}})
    store = CountingStore(tmp_path / "p.db")
    admission = Admission(settings, store=store)
    commands = admission.step(i.Submit("count things", "classic", 3, {}, "test", None))
    [start] = [c for c in commands if isinstance(c, StartRun)]
    assert start.run == 1 and start.journal == {}
    assert CountingStore.journal_reads == 0
    lost = admission.step(i.RunLost(start.task_id, 1, "the task actor died"))
    [again] = [c for c in lost if isinstance(c, StartRun)]
    assert again.run == 2 and CountingStore.journal_reads >= 1  # what a restart replays
    store.close()
