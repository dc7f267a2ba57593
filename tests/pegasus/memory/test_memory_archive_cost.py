"""What a done task's archive costs the supervisor's store (issue 33): one statement in the group that ends the
task, no savepoint; its full-text rows go in batches of ``ARCHIVE_INDEX_BATCH`` or before a search of the
archive, which therefore always finds it.  The reflection's attempt count is one statement too."""

from __future__ import annotations

from pathlib import Path

from pegasus.config import MemorySettings
from pegasus.memory import MemoryStore
from pegasus.memory.store import ARCHIVE_INDEX_BATCH
from pegasus.store import Store, reflections


def traced(store: Store) -> list[str]:
    ran: list[str] = []
    store.db.set_trace_callback(lambda sql: ran.append(sql) if not sql.startswith("--") else None)
    return ran


def test_an_archive_in_the_group_is_one_statement_and_is_searchable_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    memory = MemoryStore(store, MemorySettings())
    ran = traced(store)
    with store.group():
        ran.clear()
        memory.archive("t1", "email Alice the quarterly report", "sent", {"input_text": "email Alice"})
        assert [sql.split()[:3] for sql in ran] == [["INSERT", "INTO", "memory_archive"]]
    assert [item.id for item in memory.search("quarterly report", kinds=("archive",))] == ["task:t1"]
    ran.clear()
    assert len(memory.search("alice", kinds=("archive",))) == 1
    assert not [sql for sql in ran if sql.split()[0] in ("BEGIN", "SAVEPOINT", "INSERT", "UPDATE")]  # reads only
    assert memory.archive("t1", "other", None, {}).input == "email Alice the quarterly report"  # once per task
    assert memory.forget("task:t1") == ["task:t1"] and memory.search("quarterly", kinds=("archive",)) == []


def test_archives_are_indexed_together_in_batches(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    memory = MemoryStore(store, MemorySettings())
    ran = traced(store)
    for n in range(1, 2 * ARCHIVE_INDEX_BATCH + 4):
        memory.archive(f"t{n}", f"task number {n} about kiwis", f"answer {n}", {"n": n})
    indexed = [sql for sql in ran if sql.startswith("INSERT INTO memory_archive_fts")]
    assert len(indexed) == 2 * ARCHIVE_INDEX_BATCH  # the last 3 wait for the next batch or a search
    unindexed = store.db.execute("SELECT COUNT(*) FROM memory_archive WHERE fts_rowid IS NULL").fetchone()[0]
    assert unindexed == 3
    assert len(memory.search("kiwis", k=100, kinds=("archive",))) == 2 * ARCHIVE_INDEX_BATCH + 3
    assert memory.index_archives() == 0


def test_the_archive_past_its_cap_drops_the_oldest_indexed_or_not(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    memory = MemoryStore(store, MemorySettings(archive_max=5))
    for n in range(1, 9):
        memory.archive(f"t{n}", f"plum task {n}", None, {})
    kept = [row[0] for row in store.db.execute("SELECT task_id FROM memory_archive ORDER BY seq")]
    assert kept == [f"t{n}" for n in range(4, 9)]
    found = sorted(item.id for item in memory.search("plum", k=20, kinds=("archive",)))
    assert found == [f"task:t{n}" for n in range(4, 9)]


def test_a_reflections_attempt_in_the_group_is_one_statement(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    ran = traced(store)
    with store.group():
        ran.clear()
        assert reflections.started(store, "t1") == 1
        assert reflections.started(store, "t1") == 2
        assert [sql.split()[:3] for sql in ran] == [["INSERT", "INTO", "post_reflections"]] * 2
    assert reflections.started(store, "t1") == 3


def test_past_its_cap_the_archive_still_indexes_in_batches(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    memory = MemoryStore(store, MemorySettings(archive_max=5))
    ran = traced(store)
    for n in range(1, 9):
        memory.archive(f"t{n}", f"fig task {n}", None, {})
    assert not [sql for sql in ran if sql.startswith("INSERT INTO memory_archive_fts")]  # 8 < one batch
    assert store.db.execute("SELECT COUNT(*) FROM memory_archive").fetchone()[0] == 5
