"""The store's health core (pegasus.store.health) and how a damaged file is recognised (issue 28)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from pegasus.store import DiskFull, Store, StoreCorrupt, StoreReplaced, StoreUnavailable
from pegasus.store.health import (
    CheckFile, Failed, HaltWork, ProbeAfter, ProbeDue, ProbeFailed, PROBE_MAX_S, Recovered, Report, SaveTasks,
    StoreHealth, TruncateWal, TryWrite, WalFolded,
)

DB = Path("/state/pegasus.db")


def kinds(commands) -> list[type]:
    return [type(c) for c in commands]


def test_a_full_disk_halts_once_folds_the_wal_in_before_any_write_and_resumes() -> None:
    health = StoreHealth()
    first = health.failed(DiskFull(DB), now=10.0)
    assert kinds(first) == [Report, HaltWork, TruncateWal, ProbeAfter]
    assert first[0].event == "store_full" and "free space on /state" in first[0].fields["action"]
    assert health.failed(DiskFull(DB), now=10.5) == []  # the same state again: said once, halted once
    assert health.probe() == [TruncateWal(probing=True)]  # the WAL first: no write yet
    assert health.wal_folded(DiskFull(DB), now=11.0) == [ProbeAfter(1.0)]  # no room to fold it in: wait
    assert health.wal_folded(None, now=12.0, freed=4096) == [TryWrite()]
    assert health.status("p")["wal_freed_bytes"] == 4096 and health.status("p")["state"] == "full"
    report, = health.recovered(now=12.5)
    assert report.event == "store_available" and report.fields["refused_s"] == 2.5
    assert health.writable and health.probe() == []


def test_in_the_one_core_shape_each_input_is_a_step_with_its_clock() -> None:
    """The supervisor steps the health core as every core: ``step(input)``, the time in the input."""
    health = StoreHealth()
    assert kinds(health.step(Failed(StoreUnavailable(DB, "I/O error"), now=10.0))) == [
        Report, HaltWork, CheckFile, ProbeAfter]
    assert health.step(ProbeDue()) == [TryWrite()]
    assert health.step(ProbeFailed(StoreUnavailable(DB, "I/O error"), now=11.0)) == [ProbeAfter(2.0)]  # backing off
    assert health.step(WalFolded(None, now=12.0)) == [TryWrite()]
    report, = health.step(Recovered(now=15.0))
    assert report.fields["refused_s"] == 5.0 and health.writable


def test_a_damaged_store_is_said_once_saved_and_never_probed() -> None:
    health = StoreHealth()
    commands = health.failed(StoreCorrupt(DB, "database disk image is malformed"), now=1.0)
    assert kinds(commands) == [Report, SaveTasks, HaltWork]  # no probe: it cannot resume by itself
    assert commands[0].event == "store_damaged"
    status = health.status(str(DB))
    assert status["state"] == "damaged" and status["writable"] is False
    assert "pegasus stop" in status["action"] and "pegasus start" in status["action"]
    assert "cannot resume by itself" in health.refusal() and "resumes by itself" not in \
        health.refusal().replace("cannot resume by itself", "")
    assert health.probe() == [] and health.failed(DiskFull(DB), now=2.0) == []  # damaged stays damaged
    assert health.probe_failed(StoreCorrupt(DB, "x"), now=3.0) == []


def test_an_io_error_checks_the_file_once_then_backs_off() -> None:
    health = StoreHealth()
    assert kinds(health.failed(StoreUnavailable(DB, "disk I/O error"), now=0.0)) == \
        [Report, HaltWork, CheckFile, ProbeAfter]
    assert health.probe() == [TryWrite()]
    waits = [health.probe_failed(StoreUnavailable(DB, "disk I/O error"), now=float(n))[-1].seconds for n in range(8)]
    assert waits == sorted(waits) and waits[0] == 2.0 and waits[-1] == PROBE_MAX_S
    found = health.failed(StoreCorrupt(DB, "quick_check"), now=9.0)  # what CheckFile found
    assert kinds(found) == [Report, SaveTasks] and health.probe() == []


def test_a_replaced_store_is_never_probed() -> None:
    health = StoreHealth()
    assert kinds(health.failed(StoreReplaced(DB, deleted=True), now=0.0)) == [Report, HaltWork]
    assert health.probe() == [] and "put the database back" in health.status("p")["action"]


@given(st.lists(st.sampled_from(["full", "io", "corrupt", "probe", "folded", "recovered"]), max_size=30))
def test_at_most_one_probe_is_ever_pending(steps: list[str]) -> None:
    """Whatever happens, the commands never start a second chain of probes (a hot loop of writes)."""
    health, pending, now = StoreHealth(), 0, 0.0
    errors = {"full": DiskFull(DB), "io": StoreUnavailable(DB, "io"), "corrupt": StoreCorrupt(DB, "x")}
    for step in steps:
        now += 1
        if step in errors:
            commands = health.failed(errors[step], now)
        elif step == "probe":
            if not pending:
                continue
            pending -= 1
            commands = health.probe()
            if TryWrite() in commands:  # the write fails again
                commands = health.probe_failed(health.error or DiskFull(DB), now)
        elif step == "folded":
            continue
        else:
            commands = health.recovered(now)
            pending = 0  # a pending wakeup finds it writable and does nothing
        pending += sum(isinstance(c, ProbeAfter) for c in commands)
        assert pending <= 1
        assert all(c.seconds <= PROBE_MAX_S for c in commands if isinstance(c, ProbeAfter))


# -- the file itself ------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "pegasus.db")
    with store.group():
        for n in range(100):
            store.db.execute("INSERT INTO audit (audit_id, task_id, level, event_type, payload, created_at)"
                             " VALUES (?, 't', 'info', 'X', ?, 'now')", (f"a{n}", "x" * 300))
    store.truncate_wal()
    yield store
    store.close()


def test_a_truncated_file_is_damage_found_before_the_next_write(store: Store) -> None:
    os.truncate(store.path, 0)
    with pytest.raises(StoreCorrupt, match="truncated to 0 bytes"):
        store.probe()


def test_a_header_written_over_is_damage_found_before_the_next_write(store: Store) -> None:
    with open(store.path, "r+b") as file:
        file.write(b"\xff" * 100)
    with pytest.raises(StoreCorrupt, match="header was overwritten") as found:
        store.probe()
    assert "cannot resume by itself" in str(found.value) and "pegasus restore BACKUP" in str(found.value)


def test_a_page_written_over_is_found_by_the_check(store: Store) -> None:
    assert store.damage() is None
    size = store.path.stat().st_size
    with open(store.path, "r+b") as file:  # a page in the middle of the audit table
        file.seek(size // 2 // 4096 * 4096)
        file.write(os.urandom(4096))
    with sqlite3.connect(store.path) as other:  # another writer: the store's page cache is read again
        other.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('other', 'x')")
    damage = store.damage()
    assert isinstance(damage, StoreCorrupt) and "is damaged" in str(damage)
