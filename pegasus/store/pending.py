"""The rows of a task's transitions, waiting for the end of their transaction and written there together.

A transition's rows (transition, audit, checkpoint, journal end, usage, full-text) and its task row's
new columns go with one ``executemany`` per table and one UPDATE per task row just before the COMMIT,
a new task's row and full-text rows first (a group's plain submits: no savepoint a task),
or before anything else reads or writes in the same transaction: what commits is what the writes one
by one would have left, in the same order.  ``lifecycle`` is each task's lifecycle state as this
transaction left it: the writer holds the lock, so a second compare-and-set is answered from it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

TASK = ("INSERT INTO tasks (task_id, machine, lifecycle_state, cognitive_state, priority, seq, input, source,"
        " metadata, created_at, updated_at) VALUES (?, ?, 'draft', ?, ?, ?, ?, ?, ?, ?, ?)")
TASK_TEXT = "INSERT INTO task_search (rowid, input) VALUES ((SELECT rowid FROM tasks WHERE task_id = ?), ?)"
TASK_META = "INSERT OR REPLACE INTO task_meta (task_id, key, value) VALUES (?, ?, ?)"
TRANSITION = ("INSERT INTO transitions (task_id, machine, run, from_state, to_state, event, detail, created_at)"
              " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
AUDIT = "INSERT INTO audit (audit_id, task_id, level, event_type, payload, created_at) VALUES (?, ?, 'info', ?, ?, ?)"
CHECKPOINT = "INSERT INTO checkpoints (task_id, run, kind, state, data, created_at) VALUES (?, ?, ?, ?, ?, ?)"
JOURNAL_END = ("INSERT INTO journal (key, task_id, run, step_index, tool, effect, status, result, started_at,"
               " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
               " status = excluded.status, result = excluded.result, finished_at = excluded.finished_at")
USAGE = ("INSERT INTO usage_totals (model, tier, calls, prompt_tokens, cached_tokens, completion_tokens,"
         " total_tokens, cost_usd, unpriced_calls, estimated_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
         " ON CONFLICT (model, tier)"
         " DO UPDATE SET calls = calls + excluded.calls, prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
         " cached_tokens = cached_tokens + excluded.cached_tokens,"
         " completion_tokens = completion_tokens + excluded.completion_tokens,"
         " total_tokens = total_tokens + excluded.total_tokens,"
         " cost_usd = CASE WHEN excluded.cost_usd IS NULL THEN cost_usd"
         " ELSE COALESCE(cost_usd, 0) + excluded.cost_usd END,"
         " unpriced_calls = unpriced_calls + excluded.unpriced_calls,"
         " estimated_calls = estimated_calls + excluded.estimated_calls")
# A task's result in its full-text row (pegasus.store.search), written with the move to done.
RESULT_TEXT = "UPDATE task_search SET result = ? WHERE rowid = (SELECT rowid FROM tasks WHERE task_id = ?)"
# The waiting rows' lists, in the order the flush writes them, and each one's statement.
_TABLES = (("tasks", TASK), ("task_texts", TASK_TEXT), ("task_meta", TASK_META), ("transitions", TRANSITION),
           ("audit", AUDIT), ("checkpoints", CHECKPOINT), ("journal", JOURNAL_END), ("usage", USAGE),
           ("results", RESULT_TEXT))


class PendingWrites:
    """What waits for the flush: rows per table in call order, and each task row's newest column values."""

    tasks: list[tuple[Any, ...]]  # new tasks' rows, with their full-text rows and metadata pairs
    task_texts: list[tuple[Any, ...]]
    task_meta: list[tuple[Any, ...]]
    transitions: list[tuple[Any, ...]]
    audit: list[tuple[Any, ...]]
    checkpoints: list[tuple[Any, ...]]
    journal: list[tuple[Any, ...]]
    usage: list[tuple[Any, ...]]  # a stage's model usage, added to its model's totals
    results: list[tuple[Any, ...]]  # (text, task_id) for the full-text index

    def __init__(self) -> None:
        self.lifecycle: dict[str, str] = {}  # task_id -> its lifecycle state in this transaction
        self.clear()

    def clear(self) -> None:
        for name, _ in _TABLES:
            setattr(self, name, [])
        self.rows: dict[str, dict[str, Any]] = {}  # task_id -> columns to set on its row

    def reset(self) -> None:
        """The transaction ended (or a write of its own failed): nothing waits and no state is known."""
        self.clear()
        self.lifecycle.clear()

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name, _ in _TABLES) or bool(self.rows)

    def created(self, transition: tuple[Any, ...], audit: tuple[Any, ...], checkpoint: tuple[Any, ...]) -> None:
        """A new task's first history rows: its TASK_CREATED transition and audit, its first checkpoint."""
        self.transitions.append(transition)
        self.audit.append(audit)
        self.checkpoints.append(checkpoint)

    def set_row(self, task_id: str, columns: dict[str, Any]) -> None:
        """Columns the task row takes at the flush (later values win, as later UPDATEs would)."""
        self.rows.setdefault(task_id, {}).update(columns)

    def written(self, task_id: str, columns: dict[str, Any]) -> None:
        """The task row was just UPDATEd with ``columns``: what was waiting for them is older."""
        waiting = self.rows.get(task_id)
        if waiting is not None:
            for name in columns:
                waiting.pop(name, None)

    def extend(self, later: PendingWrites) -> None:
        """``later``'s rows wait after these (a write apart in the same transaction: ``Database.apart``)."""
        for name, _ in _TABLES:
            getattr(self, name).extend(getattr(later, name))
        for task_id, columns in later.rows.items():
            self.set_row(task_id, columns)
        self.lifecycle.update(later.lifecycle)

    def flush(self, db: sqlite3.Connection) -> None:
        """Write everything waiting, in table order (rows of one table keep their order), then forget it."""
        try:
            for name, sql in _TABLES:
                rows = getattr(self, name)
                if rows:
                    db.executemany(sql, rows)
            by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
            for task_id, columns in self.rows.items():
                if columns:
                    by_columns.setdefault(tuple(columns), []).append((*columns.values(), task_id))
            for names, params in by_columns.items():
                db.executemany(f"UPDATE tasks SET {', '.join(f'{n} = ?' for n in names)} WHERE task_id = ?", params)
        finally:
            self.clear()
