"""The store names a damaged file and the check it failed, refuses writes to a deleted or replaced
file, rolls a write that finds the disk full back whole, and backs itself up consistently."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from pegasus.store import DiskFull, Store, StoreDamaged, StoreError, StoreReplaced
from pegasus.store.backup import backup_file, restore_file
from pegasus.store.checkpoint import encode_full
from pegasus.store.schema import MIGRATIONS, SCHEMA_VERSION
from pegasus.task import TaskFSM


def add_task(store: Store, task_id: str, text: str = "count things") -> None:
    fsm = TaskFSM.create("classic", text, task_id=task_id)
    store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 3,
                       "seq": 1, "input": text, "source": "test"}, encode_full(fsm.snapshot()))


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A closed store of 200 tasks (~100 pages)."""
    path = tmp_path / "pegasus.db"
    store = Store(path)
    for index in range(200):
        add_task(store, f"t{index}", "count the words " * 20)
    store.close()
    return path


PAGE = 4096


@pytest.mark.parametrize("damage, check", [
    (lambda data: b"definitely not sqlite" * 100, "file header"),
    (lambda data: data[:4 * PAGE] + b"\xa5" * PAGE + data[5 * PAGE:], "PRAGMA quick_check"),  # one btree page
    (lambda data: data[:2 * PAGE] + bytes(PAGE) + data[3 * PAGE:], "PRAGMA quick_check"),  # a page zeroed
    (lambda data: data[:len(data) // 2], "PRAGMA quick_check"),  # truncated
    (lambda data: data[:100] + b"\x5a" * (PAGE - 100) + data[PAGE:], "PRAGMA quick_check"),  # the schema page
])
def test_a_damaged_database_is_refused_naming_the_file_and_the_check(filled: Path, damage, check) -> None:
    filled.write_bytes(damage(filled.read_bytes()))
    with pytest.raises(StoreDamaged) as caught:
        Store(filled)
    assert caught.value.check == check and caught.value.path == filled
    assert str(filled) in str(caught.value) and check in str(caught.value)


def test_a_newer_schema_is_refused_naming_the_check(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "p.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreDamaged, match=r"p\.db failed the check schema version: .*newer Pegasus"):
        Store(tmp_path / "p.db")


def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreDamaged, match=r"failed the check schema: an SQLite database of another program \(tables users\)"):
        Store(path)
    assert path.read_bytes() == before


def test_a_database_missing_a_table_is_refused(filled: Path) -> None:
    db = sqlite3.connect(filled)
    db.execute("DROP TABLE journal")
    db.commit()
    db.close()
    with pytest.raises(StoreDamaged, match=r"failed the check schema: table\(s\) journal missing"):
        Store(filled)


def test_a_version_1_store_migrates_and_keeps_its_tasks(tmp_path: Path) -> None:
    """The shipped first migration is kept as it was; a store it made opens and gains the new tables."""
    path = tmp_path / "p.db"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.close()
    store = Store(path)
    add_task(store, "old")
    assert store.schema_version() == SCHEMA_VERSION >= 2
    assert store.claimed("submit", "k") is None and store.task_row("old") is not None


def test_a_deleted_database_takes_no_write_and_says_so(filled: Path) -> None:
    store = Store(filled)
    os.unlink(filled)
    with pytest.raises(StoreReplaced, match=rf"store {filled} was deleted while the system ran: no work is accepted"):
        add_task(store, "lost")
    assert store.task_row("t0") is not None  # the open file still reads (a backup can save it)
    assert not store.db.in_transaction


def test_a_replaced_database_takes_no_write_and_says_so(filled: Path, tmp_path: Path) -> None:
    store = Store(filled)
    shutil.copy(filled, tmp_path / "other.db")
    os.replace(tmp_path / "other.db", filled)
    with pytest.raises(StoreReplaced, match="was replaced by another file"):
        with store.group():
            add_task(store, "lost")
    with pytest.raises(StoreReplaced):
        store.probe()


def test_a_full_disk_rolls_the_write_back_says_disk_full_and_passes(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    add_task(store, "t0")
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, as on a full disk
    with pytest.raises(DiskFull, match=rf"^disk full: {tmp_path} \(p\.db: database or disk is full\)"):
        with store.group():
            add_task(store, "t1")  # fits
            add_task(store, "t2", "x" * 20_000)  # does not
    assert not store.db.in_transaction
    assert store.task_row("t1") is None  # the group is rolled back whole: nothing half-written
    store.db.execute(f"PRAGMA max_page_count = {pages + 1000}")  # space is back
    store.probe()
    add_task(store, "t2", "x" * 20_000)
    assert store.task_row("t2") is not None


def test_a_backup_is_a_private_consistent_copy_that_opens(filled: Path, tmp_path: Path) -> None:
    store = Store(filled)
    target = tmp_path / "backups" / "copy.db"
    target.parent.mkdir()
    report = store.backup(target)
    assert report["tasks"] == 200 and report["path"] == str(target) and report["schema_version"] == SCHEMA_VERSION
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["copy.db"]  # no partial file left
    copy = Store(target)
    assert copy.task_row("t199") == store.task_row("t199")


def test_a_backup_refuses_to_overwrite_unless_asked(filled: Path, tmp_path: Path) -> None:
    store = Store(filled)
    target = tmp_path / "copy.db"
    target.write_text("keep me")
    with pytest.raises(StoreError, match="copy.db exists: give --force"):
        store.backup(target)
    assert target.read_text() == "keep me"
    assert store.backup(target, overwrite=True)["tasks"] == 200
    with pytest.raises(StoreError, match="onto its own file"):
        store.backup(filled, overwrite=True)
    with pytest.raises(ValueError, match="must be absolute"):
        store.backup("relative.db")


def test_a_backup_of_a_deleted_database_saves_what_the_open_file_holds(filled: Path, tmp_path: Path) -> None:
    store = Store(filled)
    os.unlink(filled)
    assert store.backup(tmp_path / "saved.db")["tasks"] == 200


def test_a_backup_without_a_running_system_reads_the_file(filled: Path, tmp_path: Path) -> None:
    assert backup_file(filled, tmp_path / "offline.db")["tasks"] == 200
    with pytest.raises(StoreError, match="no store at"):
        backup_file(tmp_path / "missing.db", tmp_path / "x.db")


def test_a_state_directory_whose_store_went_missing_is_refused(tmp_path: Path) -> None:
    """A restart must not start empty where a store was (issue 15: 300 tasks became "unknown task")."""
    store = Store.in_state_dir(tmp_path)
    add_task(store, "t0")
    store.close()
    marker = tmp_path / "pegasus.db.created"
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    (tmp_path / "pegasus.db").unlink()
    with pytest.raises(StoreError, match=rf"store {tmp_path}/pegasus.db is missing, but this state directory had one"):
        Store.in_state_dir(tmp_path)
    (tmp_path / "pegasus.db").write_bytes(b"")  # an empty file in its place is no store either
    with pytest.raises(StoreError, match="is missing"):
        Store.in_state_dir(tmp_path)
    marker.unlink()  # said on purpose: start with no tasks
    assert Store.in_state_dir(tmp_path).task_row("t0") is None


def test_restore_puts_a_backup_in_place_and_keeps_the_files_it_replaced(filled: Path, tmp_path: Path) -> None:
    backup_file(filled, tmp_path / "backup.db")
    filled.write_bytes(b"damaged")
    report = restore_file(tmp_path / "backup.db", filled)
    assert report["tasks"] == 200 and report["path"] == str(filled)
    assert Store(filled).task_row("t199") is not None and stat.S_IMODE(filled.stat().st_mode) == 0o600
    kept = report["kept"][0]  # the database (and what was left of its -wal, -shm)
    assert Path(kept).read_bytes() == b"damaged" and ".before-restore-" in kept


def test_a_restore_that_fails_puts_the_files_back(filled: Path, tmp_path: Path) -> None:
    (tmp_path / "not-a-backup.db").write_bytes(b"definitely not sqlite" * 300)
    before = filled.read_bytes()
    with pytest.raises(StoreError):
        restore_file(tmp_path / "not-a-backup.db", filled)
    assert filled.read_bytes() == before
    with pytest.raises(StoreError, match="is the store itself"):
        restore_file(filled, filled)
