"""The memory store: facts, episodes and the archive in the tasks' SQLite database, searched with FTS5 (BM25).

Functions over a ``pegasus.store.database.Database``: every write is one transaction (a savepoint inside
the supervisor's ``group``; an archive one statement), so a refused write leaves nothing behind.  It never
calls a model: vectors are handed in, or given later by ``pegasus.memory.vectors``.  One FTS5 index holds
what recall searches (each fact's current version, each episode); archived tasks have their own,
so recall never ranks them.  Ranking is ``pegasus.memory.ranking``'s.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

from pegasus import codec
from pegasus.config import MemorySettings
from pegasus.memory import embeddings, vector_index
from pegasus.memory.errors import MemoryCapExceeded, MemoryNotFound, MemoryStoreError
from pegasus.memory.query import words
from pegasus.memory.ranking import best_rows
from pegasus.memory.vectors import STALE
from pegasus.memory.values import (RECALLED, ArchivedTask, Episode, Fact, Kind, MemoryItem, check_path, normalise,
                                   one_line, parse_id)
from pegasus.store.database import Database
from pegasus.store.errors import StoreError
from pegasus.task.events import utc_now
from pegasus.task.fsm import Clock

FACT_COLUMNS = "path, version, content, created_at, task_id"
EPISODE_COLUMNS = "episode_id, task_id, title, summary, details, lesson, created_at"
MAX_K = 100
ARCHIVE_INDEX_BATCH = 32  # archived tasks put in the full-text index together


class MemoryStore:
    """Long-term memory over one database (see the module docstring).  The whole API part B and the tools use."""

    def __init__(self, database: Database, settings: MemorySettings | None = None, *, clock: Clock = utc_now) -> None:
        self.database = database
        self.settings = settings or MemorySettings()
        self.clock = clock

    # -- facts --------------------------------------------------------------------------------
    def write_fact(self, path: str, content: str, *, task_id: str | None = None,
                   vector: bytes | None = None, created_at: str | None = None, version: int | None = None) -> Fact:
        """A new version of ``path`` holding ``content``; the current version when it already holds it (idempotent).

        ``created_at``/``version``: kept as given (import), when ``version`` is past every version the path had."""
        check_path(path)
        with self.database.transaction() as db:
            return self._write(db, path, normalise(content), task_id, vector, created_at, version)

    def _write(self, db: sqlite3.Connection, path: str, content: str, task_id: str | None, vector: bytes | None,
               created_at: str | None = None, version: int | None = None) -> Fact:
        if not content:
            raise MemoryStoreError(f"fact {path!r}: empty content (use `forget` to remove a fact)")
        existing = self._current(db, path)
        if existing is not None and existing.content == content:
            if vector is not None:  # the same content again, now with its vector: kept when the row had none
                db.execute(f"UPDATE memory_facts SET vector = ?, vector_model = ? WHERE path = ? AND current = 1 "
                           f"AND {STALE}", (vector, self._model, path, self._model))  # (or another model's)
                vector_index.touched(self.database, "fact", path)
            return existing
        self._check_bytes(db, path, content)
        last = db.execute("SELECT MAX(version) FROM memory_facts WHERE path = ?", (path,)).fetchone()[0] or 0
        new_version = version if version is not None and version > last else last + 1
        when = created_at or self._now()
        old = db.execute("SELECT fts_rowid FROM memory_facts WHERE path = ? AND current = 1", (path,)).fetchone()
        if old is not None and old[0] is not None:
            db.execute("DELETE FROM memory_fts WHERE rowid = ?", (old[0],))
        db.execute("UPDATE memory_facts SET current = 0, fts_rowid = NULL WHERE path = ? AND current = 1", (path,))
        fts = self._index(db, "fact", path, path, content)
        db.execute("INSERT INTO memory_facts (path, version, content, bytes, current, task_id, created_at, "
                   "fts_rowid, vector, vector_model) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
                   (path, new_version, content, len(content.encode()), task_id, when, fts, vector,
                    self._model if vector is not None else None))
        vector_index.touched(self.database, "fact", path)
        self._prune_versions(db, path)
        return Fact(path, new_version, content, when, task_id)

    def append_fact(self, path: str, text: str, *, key: str | None = None, task_id: str | None = None) -> Fact:
        """``text`` added on a new line of ``path`` (created when absent).  With ``key``, a second append of the
        same key changes nothing and returns the version the first one made (or the current one)."""
        check_path(path)
        with self.database.transaction() as db:
            if key is not None:
                row = db.execute("SELECT path, version FROM memory_append_keys WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    found = self._version(db, row[0], row[1]) or self._current(db, row[0])
                    if found is not None:
                        return found
            existing = self._current(db, path)
            content = normalise(text) if existing is None else existing.content + "\n" + normalise(text)
            fact = self._write(db, path, content, task_id, None)
            if key is not None:
                db.execute("INSERT OR REPLACE INTO memory_append_keys (key, path, version) VALUES (?, ?, ?)",
                           (key, fact.path, fact.version))
            return fact

    def read_fact(self, path: str, version: int | None = None) -> Fact:
        check_path(path)
        db = self.database.db
        fact = self._current(db, path) if version is None else self._version(db, path, version)
        if fact is None:
            raise MemoryNotFound(f"fact:{path}" + (f"@{version}" if version is not None else ""),
                                 "see `pegasus memory list`")
        return fact

    def fact_history(self, path: str) -> list[Fact]:
        """Every kept version of ``path``, oldest first (a forgotten path has none)."""
        check_path(path)
        rows = self.database.db.execute(f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE path = ? AND content IS NOT "
                                        "NULL ORDER BY version", (path,)).fetchall()
        return [Fact(*row) for row in rows]

    def list_facts(self, prefix: str = "") -> list[Fact]:
        """The current version of every fact whose path starts with ``prefix``, by path."""
        rows = self.database.db.execute(
            f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE current = 1 AND content IS NOT NULL "
            "AND substr(path, 1, ?) = ? ORDER BY path", (len(prefix), prefix)).fetchall()
        return [Fact(*row) for row in rows]

    def fact_bytes(self) -> int:
        row = self.database.db.execute("SELECT COALESCE(SUM(bytes), 0) FROM memory_facts WHERE current = 1 "
                                       "AND content IS NOT NULL").fetchone()
        return int(row[0])

    # -- episodes -----------------------------------------------------------------------------
    def add_episode(self, task_id: str | None, title: str, summary: str, details: str = "", lesson: str = "", *,
                    vector: bytes | None = None, created_at: str | None = None,
                    episode_id: int | None = None) -> Episode:
        """A new episode; the task's episode when it has one already (one per task: idempotent), or the
        episode of the same request and outcome (title, summary, details and lesson all equal: a repeat, a
        schedule's tick, adds nothing).  Past ``[memory] episodes_max`` the oldest episode is
        dropped (the reflector must never start failing for good)."""
        title, (summary, details, lesson) = one_line(title), (normalise(text) for text in (summary, details, lesson))
        if not title:
            raise MemoryStoreError("an episode needs a title")
        with self.database.transaction() as db:
            if task_id is not None:
                row = db.execute(f"SELECT {EPISODE_COLUMNS} FROM memory_episodes WHERE task_id = ?",
                                 (task_id,)).fetchone()
                if row is not None:
                    return Episode(*row)
            if episode_id is None:  # an import keeps its ids; a task's repeat is the episode there is
                row = db.execute(f"SELECT {EPISODE_COLUMNS} FROM memory_episodes WHERE title = ? AND summary = ? "
                                 "AND details = ? AND lesson = ? ORDER BY episode_id LIMIT 1",
                                 (title, summary, details, lesson)).fetchone()
                if row is not None:
                    return Episode(*row)
            when = created_at or self._now()
            cursor = db.execute("INSERT INTO memory_episodes (episode_id, task_id, title, summary, details, lesson, "
                                "created_at, vector, vector_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                (episode_id, task_id, title, summary, details, lesson, when, vector,
                                 self._model if vector is not None else None))
            new_id = int(cursor.lastrowid or 0)
            vector_index.touched(self.database, "episode", str(new_id))
            fts = self._index(db, "episode", str(new_id), title, _episode_body(summary, details, lesson))
            db.execute("UPDATE memory_episodes SET fts_rowid = ? WHERE episode_id = ?", (fts, new_id))
            self._drop_oldest(db, "episode", new_id, self.settings.episodes_max)
            return Episode(new_id, task_id, title, summary, details, lesson, when)

    def update_episode(self, episode: Episode) -> Episode:
        """An episode's fields replaced (a person's edit, imported); its id, task and time stay."""
        title, (summary, details, lesson) = one_line(episode.title), (normalise(t) for t in (episode.summary,
                                                                                       episode.details, episode.lesson))
        with self.database.transaction() as db:
            row = db.execute("SELECT fts_rowid FROM memory_episodes WHERE episode_id = ?",
                             (episode.episode_id,)).fetchone()
            if row is None:
                raise MemoryNotFound(episode.id)
            db.execute("UPDATE memory_episodes SET title = ?, summary = ?, details = ?, lesson = ?, vector = NULL, "
                       "vector_model = NULL WHERE episode_id = ?", (title, summary, details, lesson, episode.episode_id))
            vector_index.touched(self.database, "episode", str(episode.episode_id))
            db.execute("UPDATE memory_fts SET title = ?, body = ? WHERE rowid = ?",
                       (title, _episode_body(summary, details, lesson), row[0]))
        return self.episode(episode.episode_id)

    def episode(self, episode_id: int) -> Episode:
        row = self.database.db.execute(f"SELECT {EPISODE_COLUMNS} FROM memory_episodes WHERE episode_id = ?",
                                       (episode_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"episode:{episode_id}")
        return Episode(*row)

    def episodes(self, limit: int | None = None) -> list[Episode]:
        """Episodes, newest first."""
        rows = self.database.db.execute(f"SELECT {EPISODE_COLUMNS} FROM memory_episodes ORDER BY episode_id DESC "
                                        "LIMIT ?", (-1 if limit is None else limit,)).fetchall()
        return [Episode(*row) for row in rows]

    # -- the archive --------------------------------------------------------------------------
    def archive(self, task_id: str, input: str, result: Any, context: dict[str, Any] | codec.Packed) -> ArchivedTask:
        """A completed task's full context, kept and searchable (kind "archive"); once per task (idempotent).
        Past ``[memory] archive_max`` the oldest is dropped.

        One statement, so no savepoint in the supervisor's group (atomic on its own, as ``deferred``); its
        full-text row comes with the next ``ARCHIVE_INDEX_BATCH`` (one FTS5 segment for many, not one a
        commit) or before a search of the archive (``index_archives``)."""
        when = self._now()
        with self.database.deferred():
            cursor = self.database.db.execute(
                "INSERT INTO memory_archive (task_id, input, result, context, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (task_id) DO NOTHING", (task_id, input, codec.pack(result), codec.packed(context), when))
        if cursor.rowcount != 1:
            known = self.archived(task_id)
            assert known is not None  # the conflict was its row
            return known
        newest = int(cursor.lastrowid or 0)
        batch = newest % ARCHIVE_INDEX_BATCH == 0  # past the cap too: an index each archive is a segment a commit
        if batch or newest > self.settings.archive_max:
            with self.database.transaction() as db:
                if batch:
                    self._index_archives(db)
                self._drop_oldest(db, "archive", newest, self.settings.archive_max)
        return ArchivedTask(task_id, input, result, context, when)

    def index_archives(self) -> int:
        """Index the archived tasks not yet in full text (one transaction); how many.  A read when none is."""
        newest = self.database.db.execute("SELECT fts_rowid FROM memory_archive ORDER BY seq DESC LIMIT 1").fetchone()
        if newest is None or newest[0] is not None:
            return 0
        with self.database.transaction() as db:
            return self._index_archives(db)

    def _index_archives(self, db: sqlite3.Connection) -> int:
        """The unindexed rows are the newest (each batch indexes them all, in one savepoint): read newest first
        up to the first indexed one, never the whole table."""
        rows = []
        cursor = db.execute("SELECT seq, task_id, input, result, fts_rowid FROM memory_archive ORDER BY seq DESC")
        for row in cursor:
            if row[4] is not None:
                break
            rows.append(row)
        cursor.close()  # not read to its end: ended before the writes
        for seq, task_id, input, result, _ in reversed(rows):
            fts = self._index(db, "archive", task_id, input, _text_of(None if result is None else codec.unpack(result)))
            db.execute("UPDATE memory_archive SET fts_rowid = ? WHERE seq = ?", (fts, seq))
        return len(rows)

    def archived(self, task_id: str) -> ArchivedTask | None:
        return self._archived(self.database.db, task_id)

    # -- by id ---------------------------------------------------------------------------------
    def get(self, item_id: str) -> Fact | Episode | ArchivedTask:
        """A memory by id (``fact:<path>[@<v>]``, ``episode:<n>``, ``task:<id>``) or by a fact's path."""
        kind, key, version = parse_id(item_id)
        if kind == "fact":
            return self.read_fact(key, version)
        if kind == "episode":
            return self.episode(int(key))
        found = self.archived(key)
        if found is None:
            raise MemoryNotFound(item_id)
        return found

    def forget(self, item_id: str) -> list[str]:
        """Remove a memory for good: a fact path (every version of it), an episode, or an archived task.

        A forgotten fact's content is deleted, not hidden (forgetting a secret must not keep it in the history);
        one content-less tombstone row stays so the path's versions, and so the ids tasks recorded, are never
        reused.  Returns the ids removed."""
        kind, key, version = parse_id(item_id)
        with self.database.transaction() as db:
            if kind == "fact":
                return self._forget_fact(db, key)
            table, column, ref = (("memory_episodes", "episode_id", f"episode:{key}") if kind == "episode"
                                  else ("memory_archive", "task_id", f"task:{key}"))
            row = db.execute(f"SELECT fts_rowid FROM {table} WHERE {column} = ?", (key,)).fetchone()
            if row is None:
                raise MemoryNotFound(item_id)
            db.execute(f"DELETE FROM {_fts(kind)} WHERE rowid = ?", (row[0],))
            db.execute(f"DELETE FROM {table} WHERE {column} = ?", (key,))
            vector_index.touched(self.database, kind, key)
            return [ref]

    def stats(self) -> dict[str, int]:
        db = self.database.db
        count = (lambda sql: int(db.execute(sql).fetchone()[0]))  # noqa: E731 - four one-line counts
        return {"facts": count("SELECT COUNT(*) FROM memory_facts WHERE current = 1 AND content IS NOT NULL"),
                "fact_bytes": self.fact_bytes(), "episodes": count("SELECT COUNT(*) FROM memory_episodes"),
                "archived": count("SELECT COUNT(*) FROM memory_archive")}

    # -- search --------------------------------------------------------------------------------
    def search(self, text: str, k: int = 5, *, kinds: Iterable[Kind] = RECALLED,
               query_vector: list[float] | None = None) -> list[MemoryItem]:
        """The ``k`` memories most relevant to ``text``, best first: BM25 over the FTS5 index, fused with cosine
        similarity when ``query_vector`` is given and rows have vectors.  Any text is accepted (never an FTS5
        syntax error); text with no searchable word finds nothing."""
        k = max(0, min(int(k), MAX_K))
        wanted = set(kinds)
        terms = words(text)
        if not k or not wanted or not terms:
            return []
        limit = k if query_vector is None else k * 4
        path = str(self.database.path)
        ranked: list[tuple[str, str, float]] = []
        recalled = [kind for kind in RECALLED if kind in wanted]
        if recalled:
            rows = self._count("SELECT COUNT(*) FROM memory_episodes") + self._count(
                "SELECT COUNT(*) FROM memory_facts WHERE current = 1 AND content IS NOT NULL")
            ranked += best_rows(self.database.db, path, "memory_fts", "memory_fts_terms", terms, rows, limit,
                                recalled[0] if len(recalled) == 1 else None)
        if "archive" in wanted:
            with suppress(StoreError):  # read-only (a task actor's reader): what the writer indexed
                self.index_archives()
            ranked += best_rows(self.database.db, path, "memory_archive_fts", "memory_archive_terms", terms,
                                self._count("SELECT COUNT(*) FROM memory_archive"), limit, None)
            ranked.sort(key=lambda row: -row[2])
        if query_vector is not None:
            ranked = embeddings.fuse(ranked, self._nearest(tuple(wanted), query_vector, limit))
        items = [self._item(kind, ref, score) for kind, ref, score in ranked[:k]]
        return [item for item in items if item is not None]

    def _count(self, sql: str) -> int:
        return int(self.database.db.execute(sql).fetchone()[0])

    # -- internals -----------------------------------------------------------------------------
    def _now(self) -> str:
        return self.clock().isoformat()

    def _current(self, db: sqlite3.Connection, path: str) -> Fact | None:
        row = db.execute(f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE path = ? AND current = 1 "
                         "AND content IS NOT NULL", (path,)).fetchone()
        return None if row is None else Fact(*row)

    def _version(self, db: sqlite3.Connection, path: str, version: int) -> Fact | None:
        row = db.execute(f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE path = ? AND version = ? "
                         "AND content IS NOT NULL", (path, version)).fetchone()
        return None if row is None else Fact(*row)

    def _archived(self, db: sqlite3.Connection, task_id: str) -> ArchivedTask | None:
        row = db.execute("SELECT task_id, input, result, context, created_at FROM memory_archive WHERE task_id = ?",
                         (task_id,)).fetchone()
        if row is None:
            return None
        return ArchivedTask(row[0], row[1], None if row[2] is None else codec.unpack(row[2]),
                            codec.unpack(row[3]), row[4])

    def _index(self, db: sqlite3.Connection, kind: str, ref: str, title: str, body: str) -> int:
        cursor = db.execute(f"INSERT INTO {_fts(kind)} (title, body, kind, ref) VALUES (?, ?, ?, ?)",
                            (title.replace("/", " / "), body, kind, ref))
        return int(cursor.lastrowid or 0)

    def _check_bytes(self, db: sqlite3.Connection, path: str, content: str) -> None:
        others = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM memory_facts WHERE current = 1 AND content IS NOT "
                            "NULL AND path != ?", (path,)).fetchone()[0]
        needed = int(others) + len(content.encode())
        if needed > self.settings.facts_max_bytes:
            raise MemoryCapExceeded("facts_max_bytes", self.settings.facts_max_bytes, needed,
                                    f"writing fact {path!r} ({len(content.encode())} bytes; facts then total "
                                    f"{needed} bytes)")

    def _prune_versions(self, db: sqlite3.Connection, path: str) -> None:
        db.execute("DELETE FROM memory_facts WHERE path = ? AND current = 0 AND version <= "
                   "(SELECT MAX(version) FROM memory_facts WHERE path = ?) - ?",
                   (path, path, self.settings.fact_versions_max))

    def _drop_oldest(self, db: sqlite3.Connection, kind: str, newest: int, keep: int) -> None:
        """Past ``keep`` rows, the oldest go.  Ids only grow, so there can be more than ``keep`` rows only once the
        newest id is past it: below that, no count is made (a count reads the whole table)."""
        if newest <= keep:
            return
        table, column = ("memory_archive", "seq") if kind == "archive" else ("memory_episodes", "episode_id")
        excess = int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) - keep
        if excess <= 0:
            return
        stale = db.execute(f"SELECT {column}, fts_rowid FROM {table} ORDER BY {column} LIMIT ?", (excess,)).fetchall()
        for key, fts in stale:
            db.execute(f"DELETE FROM {_fts(kind)} WHERE rowid = ?", (fts,))
            db.execute(f"DELETE FROM {table} WHERE {column} = ?", (key,))
            vector_index.touched(self.database, kind, str(key))

    def _forget_fact(self, db: sqlite3.Connection, path: str) -> list[str]:
        rows = db.execute("SELECT version, fts_rowid FROM memory_facts WHERE path = ? AND content IS NOT NULL "
                          "ORDER BY version", (path,)).fetchall()
        if not rows:
            raise MemoryNotFound(f"fact:{path}", "see `pegasus memory list`")
        last = db.execute("SELECT MAX(version) FROM memory_facts WHERE path = ?", (path,)).fetchone()[0]
        for _, fts in rows:
            if fts is not None:
                db.execute("DELETE FROM memory_fts WHERE rowid = ?", (fts,))
        db.execute("DELETE FROM memory_facts WHERE path = ?", (path,))
        vector_index.touched(self.database, "fact", path)
        db.execute("DELETE FROM memory_append_keys WHERE path = ?", (path,))
        db.execute("INSERT INTO memory_facts (path, version, content, bytes, current, created_at) "
                   "VALUES (?, ?, NULL, 0, 1, ?)", (path, last + 1, self._now()))
        return [f"fact:{path}@{version}" for version, _ in rows]

    def _item(self, kind: str, ref: str, score: float) -> MemoryItem | None:
        db = self.database.db
        if kind == "fact":
            fact = self._current(db, ref)
            return None if fact is None else MemoryItem(fact.id, "fact", fact.path, fact.content, score,
                                                        fact.created_at)
        if kind == "episode":
            row = db.execute(f"SELECT {EPISODE_COLUMNS} FROM memory_episodes WHERE episode_id = ?",
                             (int(ref),)).fetchone()
            if row is None:
                return None
            episode = Episode(*row)
            text = episode.summary + (f"\nLesson: {episode.lesson}" if episode.lesson else "")
            return MemoryItem(episode.id, "episode", episode.title, text, score, episode.created_at)
        task = self._archived(db, ref)
        return None if task is None else MemoryItem(task.id, "archive", task.input, _text_of(task.result), score,
                                                    task.created_at)

    def _nearest(self, kinds: tuple[Kind, ...], query: list[float], limit: int) -> list[tuple[str, str, float]]:
        """The ``limit`` rows with a vector of the configured model most similar to ``query`` (finds what shares no
        word with the text); fused with as many of the full-text ranking.  The kept matrix
        (``pegasus.memory.vector_index``), or without numpy every row read and ranked here."""
        kinds = tuple(kind for kind in kinds if kind in ("fact", "episode"))
        if not kinds:
            return []  # the archive has no vectors
        found = vector_index.nearest(self.database, self._model, kinds, query, limit)
        if found is not None:
            return found
        rows: list[tuple[str, str, bytes]] = []
        if "fact" in kinds:
            rows += [("fact", p, v) for p, v in self.database.db.execute(
                "SELECT path, vector FROM memory_facts WHERE current = 1 AND vector IS NOT NULL AND vector_model = ?",
                (self._model,))]
        if "episode" in kinds:
            rows += [("episode", str(i), v) for i, v in self.database.db.execute(
                "SELECT episode_id, vector FROM memory_episodes WHERE vector IS NOT NULL AND vector_model = ?",
                (self._model,))]
        return embeddings.nearest(rows, query, limit)

    @property
    def _model(self) -> str:
        """The model the vectors written here are of, and the only one searched (``vector_model``)."""
        return self.settings.embeddings_model


def _fts(kind: str) -> str:
    """The full-text index of a kind: the archive has its own (the default search never ranks it)."""
    return "memory_archive_fts" if kind == "archive" else "memory_fts"


def _episode_body(summary: str, details: str, lesson: str) -> str:
    return "\n".join(part for part in (summary, details, lesson) if part)


def _text_of(result: Any) -> str:
    if result is None or isinstance(result, str):
        return result or ""
    return json.dumps(result, ensure_ascii=False, default=str)
