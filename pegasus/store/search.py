"""Finding tasks by what they say: full text over input and result (SQLite FTS5), and metadata equality.

Two side tables written with the task row, in its transactions: ``task_search`` (FTS5, rowid = the
task row's: a migration that rebuilds ``tasks`` must keep it, and Pegasus runs no VACUUM) and
``task_meta`` (each top-level scalar metadata value as text, indexed by key and value).  A query's
words are each quoted, so nothing a user types is read as FTS5 syntax; ``register`` defines the SQL
functions the migration that adds the tables uses to fill them.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from typing import Any

from pegasus import codec

MAX_WORDS = 32  # of one text query
MAX_META = 16  # key=value filters of one query

# The schema's migration (pegasus.store.schema) runs these after ``register``.
MIGRATION = [
    """CREATE VIRTUAL TABLE task_search USING fts5(input, result, tokenize = 'unicode61 remove_diacritics 2')""",
    "INSERT INTO task_search (rowid, input, result) SELECT rowid, input, pegasus_text(result) FROM tasks",
    """CREATE TABLE task_meta (task_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        PRIMARY KEY (task_id, key))""",
    "CREATE INDEX task_meta_by_value ON task_meta (key, value)",
    "INSERT INTO task_meta (task_id, key, value) SELECT t.task_id, j.key, j.value"
    " FROM tasks AS t, json_each(pegasus_meta(t.metadata)) AS j",
]


def as_text(value: Any) -> str | None:
    """A result as the index reads it: a string as it is, anything else as JSON (None: nothing)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def meta_pairs(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """The metadata values a filter can match (strings, numbers, booleans), each as text."""
    return {str(key): value if isinstance(value, str) else json.dumps(value)
            for key, value in (metadata or {}).items()
            if isinstance(value, (str, int, float, bool)) and value == value}  # NaN matches nothing


def _packed_text(data: bytes | None) -> str | None:
    try:
        return as_text(codec.unpack(data)) if data is not None else None
    except codec.UNPACK_ERRORS:
        return None


def _packed_meta(data: bytes | None) -> str:
    try:
        value = codec.unpack(data) if data is not None else None
    except codec.UNPACK_ERRORS:
        value = None
    return json.dumps(meta_pairs(value) if isinstance(value, dict) else {})


def register(db: sqlite3.Connection) -> None:
    """The SQL functions the migration fills the tables with (packed columns decoded)."""
    db.create_function("pegasus_text", 1, _packed_text, deterministic=True)
    db.create_function("pegasus_meta", 1, _packed_meta, deterministic=True)


def forget(db: sqlite3.Connection, task_ids: list[str]) -> None:
    """Remove deleted tasks from both tables (before their rows go: the rowid is read from them)."""
    for task_id in task_ids:
        db.execute("DELETE FROM task_search WHERE rowid = (SELECT rowid FROM tasks WHERE task_id = ?)", (task_id,))
        db.execute("DELETE FROM task_meta WHERE task_id = ?", (task_id,))


def match_query(text: str) -> str | None:
    """FTS5 query of ``text``: each word quoted, all required (None: no word in it)."""
    words = re.findall(r"\w+", text)[:MAX_WORDS]
    return " ".join(f'"{word}"' for word in words) or None


def conditions(text: str | None, metadata: Mapping[str, str] | None) -> tuple[list[str], list[Any]]:
    """WHERE conditions (on ``tasks``) and their parameters for a text query and metadata equalities."""
    where: list[str] = []
    params: list[Any] = []
    if text is not None:
        query = match_query(text)
        if query is None:
            where.append("0")  # no word to look for: nothing matches
        else:
            where.append("rowid IN (SELECT rowid FROM task_search WHERE task_search MATCH ?)")
            params.append(query)
    for key, value in (metadata or {}).items():
        where.append("task_id IN (SELECT task_id FROM task_meta WHERE key = ? AND value = ?)")
        params += [key, value]
    return where, params
