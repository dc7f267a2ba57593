"""A task actor's recall (``pegasus.memory.recall.LocalRecall``, issue 33): read from the store's file on a
read-only connection, the same items the supervisor's recall gives; None (ask the supervisor) when the query
needs a vector or the store cannot be read; an unusable identity.md said in the answer, as the supervisor does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pegasus.config import Settings
from pegasus.memory import MemoryStore
from pegasus.memory.recall import LocalRecall, recalled_items
from pegasus.store import Store


def settings_in(state: Path, **memory: object) -> Settings:
    return Settings().with_overrides({"state": {"home": str(state)}, "memory": memory})


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Settings, Store]:
    settings = settings_in(tmp_path)
    settings.state_dir().mkdir(parents=True, exist_ok=True)
    store = Store.in_state_dir(settings.state_dir())
    memory = MemoryStore(store, settings.memory)
    memory.write_fact("deploy-key", "The deploy key is in the vault.")
    memory.add_episode("t1", "where is the deploy key?", "It is in the vault.")
    return settings, store


def test_a_local_recall_gives_what_the_writer_would_and_writes_nothing(stored: tuple[Settings, Store]) -> None:
    settings, store = stored
    local = LocalRecall(settings)
    identity, items, error = local.answer("where is the deploy key?", 5) or ("", (), "no answer")
    assert error is None and identity.startswith("You are")
    assert items == recalled_items(MemoryStore(store, settings.memory), "where is the deploy key?", 5)
    assert [item["id"] for item in items] == ["fact:deploy-key@1", "episode:1"]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        local._open().database.db.execute("DELETE FROM memory_facts")
    MemoryStore(store, settings.memory).write_fact("deploy-key", "The deploy key moved to the safe.")
    _, again, _ = local.answer("deploy key", 5) or ("", (), None)
    assert any("safe" in item["text"] for item in again)  # the writer's later commit, seen on the same connection
    local.close()


@pytest.mark.usefixtures("stored")
def test_a_recall_it_cannot_answer_goes_to_the_supervisor(tmp_path: Path) -> None:
    assert LocalRecall(settings_in(tmp_path, embeddings_model="e5")).answer("deploy key", 5) is None
    assert LocalRecall(settings_in(tmp_path / "nothing")).answer("deploy key", 5) is None  # no store there
    assert LocalRecall(settings_in(tmp_path, embeddings_model="e5")).answer("  ", 5) is not None  # no vector needed


def test_an_unusable_identity_file_is_said_in_the_answer(stored: tuple[Settings, Store]) -> None:
    settings, _ = stored
    path = settings.state_dir() / "identity.md"
    path.write_text("You are Ada.")
    path.chmod(0o666)  # others may write it: refused, as the supervisor refuses it
    identity, items, error = LocalRecall(settings).answer("deploy key", 5) or ("?", (), None)
    assert (identity, items) == ("", ()) and error is not None and "identity.md" in error


def test_a_store_file_replaced_is_opened_again(stored: tuple[Settings, Store], tmp_path: Path) -> None:
    settings, store = stored
    local = LocalRecall(settings)
    assert local.answer("deploy key", 5) is not None
    store.close()
    path = settings.state_dir() / "pegasus.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    replaced = Store(path)  # a restore puts another file there
    MemoryStore(replaced, settings.memory).write_fact("deploy-key", "The deploy key is in the safe.")
    _, items, _ = local.answer("deploy key", 5) or ("", (), None)
    assert [item["text"] for item in items] == ["The deploy key is in the safe."]
    local.close()


def test_a_store_it_cannot_read_now_sends_the_recall_to_the_supervisor(stored: tuple[Settings, Store]) -> None:
    settings, store = stored
    local = LocalRecall(settings)
    store.db.execute("PRAGMA locking_mode=EXCLUSIVE")  # e.g. a writer that keeps the file to itself
    store.db.execute("BEGIN EXCLUSIVE")
    try:
        assert local.answer("deploy key", 5) is None  # after READ_WAIT_S, not SQLite's default 10 s
    finally:
        store.db.execute("COMMIT")
        store.db.execute("PRAGMA locking_mode=NORMAL")
        store.db.execute("SELECT COUNT(*) FROM memory_facts").fetchone()  # the lock is let go at the next read
    assert local.answer("deploy key", 5) is not None  # opened again
    local.close()


def test_recalls_resolve_the_state_directory_once(stored: tuple[Settings, Store],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving it stats each part of the path: twice a recall was ~25% of a task actor's answering it (issue 33)."""
    settings, _ = stored
    resolved = []
    state_dir = Settings.state_dir
    monkeypatch.setattr(Settings, "state_dir", lambda self: resolved.append(1) or state_dir(self))
    local = LocalRecall(settings)
    assert (local.answer("where is the deploy key?", 5) or ("", (), "none"))[2] is None  # identity.md read too
    first = len(resolved)
    for _ in range(3):
        assert (local.answer("where is the deploy key?", 5) or ("", (), "none"))[2] is None
    local.close()
    assert len(resolved) == first
