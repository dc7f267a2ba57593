"""A recall's answer (before a think / reason stage): the identity and the k best-matching facts and episodes.

The supervisor answers ``AskRecall`` when the query needs a vector first (``[memory] embeddings_model``:
the vector index is the supervisor's).  Otherwise a task actor answers its own runs' recalls
(``LocalRecall``) on a read-only connection to the store, so the supervisor stays the one writer and
is not asked a read per task.  Both see only what is committed, and the supervisor sends nothing
before its writes commit, so a run recalls what it would have been told.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from pegasus.config import Settings
from pegasus.memory.embeddings import configured
from pegasus.memory.identity import IDENTITY_FILE, load_identity
from pegasus.memory.store import MemoryStore
from pegasus.memory.values import Kind
from pegasus.store.errors import StoreError

RECALL_KEYS = ("id", "kind", "title", "text", "score")
RECALL_TEXT_CHARS = 2000  # of one recalled memory in a task's context (checkpointed with it): k of them at most
RECALLED_KINDS: tuple[Kind, ...] = ("fact", "episode")
# A read waits at most this for a lock (rare in WAL: a recovery); then the supervisor is asked.  The task actor
# holds many runs: one recall must not stall them for SQLite's default seconds.
READ_WAIT_S = 0.5

Answer = tuple[str, tuple[dict[str, Any], ...], str | None]  # identity, items (best first), error


def recalled_items(memory: MemoryStore, query: str, k: int,
                   query_vector: list[float] | None = None) -> tuple[dict[str, Any], ...]:
    """The k best facts and episodes for ``query`` as a run's context keeps them (each text cut)."""
    found = memory.search(query, k, kinds=RECALLED_KINDS, query_vector=query_vector)
    return tuple({**{key: getattr(item, key) for key in RECALL_KEYS}, "text": item.text[:RECALL_TEXT_CHARS]}
                 for item in found)


class CurrentIdentity:
    """The identity text, read again only when identity.md changed (it is asked for before every think / reason
    stage); ``text`` raises MemoryStoreError when the file cannot be used."""

    def __init__(self) -> None:
        self._kept: tuple[object, str] | None = None  # (what it was read from, its text)
        self._dir: tuple[Settings, Path] | None = None  # the settings' state dir, resolved once (a stat a part)

    def text(self, settings: Settings) -> str:
        if self._dir is None or self._dir[0] is not settings:
            self._dir = (settings, settings.state_dir())
        path = self._dir[1] / IDENTITY_FILE
        try:
            info = os.lstat(path)
            found: tuple[int, ...] | None = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_mode, info.st_uid)
        except FileNotFoundError:
            found = None
        signature = (found, settings.agent)  # the file, or [agent] when there is none
        if self._kept is None or self._kept[0] != signature:
            self._kept = (signature, load_identity(settings).text)
        return self._kept[1]


class LocalRecall:
    """A task actor's recalls, read from the store's file (see the module docstring).  ``answer`` gives None
    when this process cannot: the query needs a vector, or the store cannot be opened or read (the
    supervisor is asked then, and answers or says why)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state_dir = settings.state_dir()  # resolved once: twice a recall was ~25% of answering it
        self.identity = CurrentIdentity()
        self._memory: MemoryStore | None = None
        self._file = (0, 0)  # the opened store's (device, inode)

    def answer(self, query: str, k: int) -> Answer | None:
        if configured(self.settings.memory) and query.strip():
            return None  # its vector is the llm pool's, and the index the supervisor's
        try:
            identity = self.identity.text(self.settings)
        except Exception as exc:  # noqa: BLE001 - an unusable identity.md: said in the context, as the supervisor does
            return "", (), f"{type(exc).__name__}: {exc}"
        try:
            return identity, recalled_items(self._open(), query, k), None
        except (StoreError, sqlite3.Error, OSError):  # not readable here (now): the supervisor answers
            self.close()
            return None

    def _open(self) -> MemoryStore:
        """The store, opened at the first recall and again when its path names another file (a restore)."""
        # Imported here: a task actor that never recalls skips it.
        from pegasus.store.sqlite import DB_FILE
        path = self.state_dir / DB_FILE
        info = os.stat(path)
        if self._memory is not None and self._file != (info.st_dev, info.st_ino):
            self.close()
        if self._memory is None:
            from pegasus.store.reader import StoreReader
            self._memory = MemoryStore(StoreReader(path, timeout_s=READ_WAIT_S), self.settings.memory)
            self._file = (info.st_dev, info.st_ino)
        return self._memory

    def close(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            memory.database.close()
