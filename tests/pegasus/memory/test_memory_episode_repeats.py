"""A new episode's repeat check does not read every episode: the work of writing one stays flat however many the
store holds (it runs in the supervisor at every done task's reflection)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pegasus.config import MemorySettings
from pegasus.memory.store import MemoryStore
from pegasus.store import Store


def _steps_of(db: sqlite3.Connection, write: object) -> int:
    """SQLite virtual-machine steps (counted every 100) a write took: rows read, not time."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    db.set_progress_handler(count, 100)
    try:
        write()  # type: ignore[operator]
    finally:
        db.set_progress_handler(None, 100)
    return steps[0]


def _episode(memory: MemoryStore, n: int) -> None:
    memory.add_episode(f"task-{n}", f"what is {n} + 1?", f"{n} + 1 = {n + 1}", f"Request: what is {n} + 1?", "")


def test_writing_an_episode_reads_no_more_with_thousands_stored(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    memory = MemoryStore(store, MemorySettings())
    for n in range(20):
        _episode(memory, n)
    few = _steps_of(store.db, lambda: _episode(memory, 20))
    with store.group():  # one commit: the setup, not what is measured
        for n in range(21, 3021):
            _episode(memory, n)
    many = _steps_of(store.db, lambda: _episode(memory, 3021))
    assert many <= few * 2 + 5, (few, many)  # read every row: ~100x
    repeat = memory.add_episode("task-again", "what is 7 + 1?", "7 + 1 = 8", "Request: what is 7 + 1?", "")
    assert repeat.task_id == "task-7"  # the repeat of a request and its outcome is still found: one episode
    store.close()
