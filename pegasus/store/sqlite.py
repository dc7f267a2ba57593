"""The embedded store: one SQLite database (WAL) under the state directory, 0600 in a 0700 directory.

Tables: tasks, checkpoints (TaskContext snapshots and deltas), transitions, audit (seed 002's
record shape) and journal (tool steps).  One writer, the supervisor's Store: a lifecycle
transition, its audit row and the task row commit together, compare-and-set on the expected
state, so a stale writer (a second supervisor, a late message) cannot overwrite a newer state.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pegasus import codec
from pegasus.codec import pack
from pegasus.files import write_private
from pegasus.idempotency import Claim
from pegasus.store.quarantine import sift
from pegasus.store.errors import StaleStateError, StoreError
from pegasus.store import search
from pegasus.store.journal import INTERRUPTED_STATUS, STARTED, StepEnd
from pegasus.store.pending import CHECKPOINT, TASK, TASK_META, TASK_TEXT
from pegasus.store.database import Database, now_iso
from pegasus.store.messages import TaskMessages
from pegasus.store.metric_facts import Tally, metric_facts
from pegasus.store.schema import JOURNAL_COLUMNS, TASK_COLUMNS
from pegasus.store.tree import TreeTables, insert_link
from pegasus.task.names import LifecycleState

__all__ = ["DB_FILE", "Checkpoint", "StaleStateError", "Store", "StoreError"]

DB_FILE = "pegasus.db"
MARKER = DB_FILE + ".created"  # written beside the store of a state directory when it is first opened

TERMINAL = (LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED)


_AUDIT_RANDOM = random.Random()  # seeded from os.urandom: an audit id must be unique, not secret
os.register_at_fork(after_in_child=_AUDIT_RANDOM.seed)  # a forked child draws its own


def _audit_id() -> str:
    """32 hex digits, the time first: each new row goes to the end of the key's index, not to a random page
    of it (a uuid4 dirtied a page of that index, and wrote it to the WAL, at every audit row).  The rest from
    a seeded generator: no system call a row (8 a task)."""
    return f"{time.time_ns() // 1000:014x}{_AUDIT_RANDOM.getrandbits(72):018x}"


def unpack(data: bytes | None) -> Any:
    return None if data is None else codec.unpack(data)


@dataclass(frozen=True)
class Checkpoint:
    id: int
    run: int
    kind: str
    state: str
    data: bytes


class Store(TaskMessages, TreeTables, Database):
    """The tables of the database (tasks, transitions, audit, checkpoints, journal, keys); one per process: the
    supervisor's."""

    durable = True  # what is written here outlives the process (Admission may forget it)

    @classmethod
    def in_state_dir(cls, state_dir: Path | str) -> Store:
        """The system's store.  A state directory that had one (``MARKER`` says so) and holds
        none now is refused: starting empty would lose every task with no word."""
        path = Path(state_dir) / DB_FILE
        marker = path.with_name(MARKER)
        if marker.exists() and (not path.exists() or path.stat().st_size == 0):
            raise StoreError(f"store {path} is missing, but this state directory had one ({marker}): put it back "
                             f"(a copy from `pegasus backup`), or delete {marker} to start with no tasks")
        store = cls(path)
        if not marker.exists():
            try:
                write_private(marker, json.dumps({"store": str(path), "created_at": now_iso()}).encode())
            except OSError:
                pass  # a full disk, say: written at the next open
        return store

    # -- writes ------------------------------------------------------------------------------
    def create_task(self, row: dict[str, Any], checkpoint: bytes, claim: Claim | None = None) -> None:
        """Insert a new task (in draft), its TASK_CREATED audit and its first full checkpoint,
        and the idempotency key it was submitted with (one transaction: both or neither).

        In an open group with no key and no link, its rows wait with those of its first moves
        (``pegasus.store.pending``): a batch of submits makes one statement a table and no savepoint.
        Nothing of it can fail alone there (a fresh id, no key to conflict); what could (encoding) runs first."""
        stamp = now_iso()
        task_id = row["task_id"]
        task = (task_id, row["machine"], row["cognitive_state"], row["priority"], row["seq"], row["input"],
                row["source"], pack(row.get("metadata") or {}), stamp, stamp)
        if None in task:  # NOT NULL, checked before anything waits: a bad row fails alone, not the group's commit
            raise StoreError(f"store {self.path}: task {task_id!r} lacks a column")
        meta = [(task_id, key, value) for key, value in search.meta_pairs(row.get("metadata")).items()]
        # its history's first rows wait with those of its first moves; the tier it was submitted with (its
        # context has it too) is read by views
        transition = (task_id, "lifecycle", 0, "-", "draft", "TASK_CREATED",
                      pack({"reason": "submitted", **_tier(row)}), stamp)
        audit = audit_row(task_id, "TASK_CREATED", {"machine": row["machine"], "priority": row["priority"],
                                                     **_tier(row)}, stamp)
        first = (task_id, 0, "full", row["cognitive_state"], checkpoint, stamp)  # its first checkpoint
        if claim is None and row.get("link") is None and self.holding:
            with self.deferred() as pending:
                pending.tasks.append(task)
                pending.task_texts.append((task_id, row["input"]))
                pending.task_meta.extend(meta)
                pending.created(transition, audit, first)
        else:
            with self.transaction() as db:
                if claim is not None:
                    db.execute("INSERT INTO idempotency (scope, key, task_id, fingerprint, created_at)"
                               " VALUES (?, ?, ?, ?, ?)", (claim.scope, claim.key, task_id, claim.fingerprint, stamp))
                db.execute(TASK, task)
                db.execute(TASK_TEXT, (task_id, row["input"]))
                if meta:
                    db.executemany(TASK_META, meta)
                if row.get("link") is not None:  # a sub-task: created with its link, or not at all
                    insert_link(db, row["link"])
                self.pending.created(transition, audit, first)
        if row.get("link") is None:
            self._unlinked.add(task_id)
        if self.holding:  # its first moves, in the same group, compare with the state it was created in
            self.pending.lifecycle[task_id] = "draft"

    def lifecycle_transition(self, task_id: str, expected: str, target: str, event: str, *, actor: str,
                             reason: str, metadata: dict[str, Any] | None = None,
                             updates: dict[str, Any] | None = None, run: int = 0) -> None:
        """Move a task expected -> target (compare-and-set) with its audit and transition rows.

        The first move of a task in a transaction is an UPDATE now (the compare-and-set); a later one
        is answered from what that left (the writer holds the lock) and its columns wait with its rows
        (``pegasus.store.pending``)."""
        stamp = now_iso()
        columns = {"lifecycle_state": target, "updated_at": stamp, **_encode_updates(updates or {})}
        transition = (task_id, "lifecycle", run, expected, target, event, pack({"reason": reason}), stamp)
        audit = audit_row(task_id, f"STATE_TRANSITION_{target.upper()}",
                           {"from_state": expected, "to_state": target, "actor": actor, "reason": reason,
                            "transition_metadata": metadata or {}}, stamp)
        with self.deferred() as pending:
            known = pending.lifecycle.get(task_id)
            if known is not None:
                if known != expected:
                    raise StaleStateError(task_id, expected, known)
                pending.set_row(task_id, columns)
            else:
                assignments = ", ".join(f"{name} = ?" for name in columns)
                cursor = self.db.execute(f"UPDATE tasks SET {assignments} WHERE task_id = ? AND lifecycle_state = ?",
                                         (*columns.values(), task_id, expected))
                if cursor.rowcount != 1:
                    actual = self.db.execute("SELECT lifecycle_state FROM tasks WHERE task_id = ?",
                                             (task_id,)).fetchone()
                    raise StaleStateError(task_id, expected, actual[0] if actual else None)
                pending.written(task_id, columns)
            pending.lifecycle[task_id] = target
            if updates and updates.get("result") is not None:  # the answer, once: at done
                pending.results.append((search.as_text(updates["result"]), task_id))
            pending.transitions.append(transition)
            pending.audit.append(audit)

    def cognitive_transition(self, task_id: str, run: int, machine: str, from_state: str, to_state: str,
                             event: str, detail: dict[str, Any] | None, checkpoint: tuple[str, bytes] | None,
                             journal_finish: StepEnd | None) -> None:
        """Record a cognitive transition, with its checkpoint and tool-journal end, in one transaction.

        The end is inserted when the step has no row yet (an idempotent step is not
        journalled as started): a finished step is never run again either way.  Its rows wait for
        the transaction's end (``pegasus.store.pending``): a report's stages make one statement a table.
        """
        if None in (task_id, run, machine, from_state, to_state, event):  # NOT NULL, checked before anything waits
            raise StoreError(f"store {self.path}: transition {event!r} of task {task_id!r} lacks a column")
        stamp = now_iso()
        usage = _usage_row(detail["usage"]) if detail and isinstance(detail.get("usage"), dict) else None
        end = journal_finish
        with self.deferred() as pending:
            pending.transitions.append((task_id, machine, run, from_state, to_state, event,
                                        pack(detail) if detail else None, stamp))
            pending.set_row(task_id, {"cognitive_state": to_state, "updated_at": stamp})
            if checkpoint is not None:
                pending.checkpoints.append((task_id, run, checkpoint[0], to_state, checkpoint[1], stamp))
            if usage is not None:
                pending.usage.append(usage)
            if end is not None:
                pending.journal.append((end.key, task_id, run, end.step_index, end.tool, end.effect, end.status,
                                        end.result, stamp, stamp))

    def update_task(self, task_id: str, **updates: Any) -> None:
        columns = {**_encode_updates(updates), "updated_at": now_iso()}
        assignments = ", ".join(f"{name} = ?" for name in columns)
        with self.transaction() as db:
            db.execute(f"UPDATE tasks SET {assignments} WHERE task_id = ?", (*columns.values(), task_id))

    def add_checkpoint(self, task_id: str, run: int, kind: str, state: str, data: bytes) -> None:
        with self.transaction() as db:
            db.execute(CHECKPOINT, (task_id, run, kind, state, data, now_iso()))

    def journal_start(self, key: str, task_id: str, run: int, step_index: int, tool: str | None,
                      effect: str) -> dict[str, Any] | None:
        """Write a step as started before it runs; returns the existing row if the key is known."""
        with self.transaction() as db:
            existing = db.execute(f"SELECT {_JOURNAL} FROM journal WHERE key = ?", (key,)).fetchone()
            if existing is not None:
                return _journal_row(existing)
            db.execute("INSERT INTO journal (key, task_id, run, step_index, tool, effect, status, started_at)"
                       " VALUES (?, ?, ?, ?, ?, ?, 'started', ?)", (key, task_id, run, step_index, tool, effect, now_iso()))
        return None

    # -- reads --------------------------------------------------------------------------------------
    def task_row(self, task_id: str, *, lenient: bool = False) -> dict[str, Any] | None:
        """The task's row (None: no such task); ``lenient``: as a view shows it, see ``_task_row``."""
        row = self._query(f"SELECT {_TASKS_RAW if lenient else _TASKS} FROM tasks WHERE task_id = ?", (task_id,))
        return _task_row(row[0], lenient=lenient) if row else None

    def unfinished_tasks(self, set_aside: Callable[[dict[str, Any], str], None] | None = None) -> list[dict[str, Any]]:
        """Every task not done, failed or canceled, oldest first.  With ``set_aside``, a row whose columns will
        not decode (text that is not UTF-8, a packed value) is handed to it, shown as a view would, instead of
        raising (pegasus.store.quarantine)."""
        rows = self._query(f"SELECT {_TASKS_RAW} FROM tasks WHERE lifecycle_state NOT IN "
                           f"({', '.join('?' * len(TERMINAL))}) ORDER BY seq", TERMINAL)
        if set_aside is None:
            return [_task_row(r) for r in rows]
        return list(sift(rows, _task_row, lambda row, error: set_aside(_task_row(row, lenient=True), error)))

    def list_tasks(self, state: str | None = None, limit: int = 50, offset: int = 0,
                   before: int | None = None, text: str | None = None,
                   metadata: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """A page of tasks, newest first; ``state`` matches the lifecycle or the cognitive state; ``before``
        (a task's ``seq``): only tasks submitted before that one (a cursor: pages do not shift as tasks come);
        ``text``: every word of it in the input or the result; ``metadata``: these values (pegasus.store.search)."""
        columns = ", ".join(f"CAST({c} AS BLOB)" if c in _TEXT else c for c in (
            "task_id", "machine", "priority", "lifecycle_state", "cognitive_state", "input", "exit_reason",
            "updated_at", "seq", "created_at"))  # text as bytes: one row that is not UTF-8 fails no page
        where, params = _filters(state, text, metadata)
        if before is not None:
            where = f"{where} AND seq < ?" if where else " WHERE seq < ?"
            params = (*params, before)
        rows = self._query(f"SELECT {columns} FROM tasks{where} ORDER BY seq DESC LIMIT ? OFFSET ?",
                           (*params, limit, offset))
        names = ("task_id", "machine", "priority", "lifecycle_state", "state", "input", "exit_reason", "updated_at",
                 "seq", "created_at")  # created_at: the dashboard's age column
        return [{name: value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                 for name, value in zip(names, row)} for row in rows]

    def count_tasks(self, state: str | None = None, text: str | None = None,
                    metadata: dict[str, str] | None = None) -> int:
        """How many tasks ``list_tasks`` pages through."""
        where, params = _filters(state, text, metadata)
        return int(self._query(f"SELECT COUNT(*) FROM tasks{where}", params)[0][0])

    def counts(self) -> dict[str, int]:
        """How many tasks are in each lifecycle state."""
        return {state: int(n) for state, n in
                self._query("SELECT lifecycle_state, COUNT(*) FROM tasks GROUP BY lifecycle_state", ())}

    def checkpoints(self, task_id: str) -> list[Checkpoint]:
        """The checkpoints to rebuild the task from: the last full one and every delta after it."""
        rows = self._query("SELECT id, run, kind, state, data FROM checkpoints WHERE task_id = ? AND id >= "
                           "(SELECT COALESCE(MAX(id), 0) FROM checkpoints WHERE task_id = ? AND kind = 'full')"
                           " ORDER BY id", (task_id, task_id))
        return [Checkpoint(*row) for row in rows]

    def transitions(self, task_id: str, *, lenient: bool = False) -> list[dict[str, Any]]:
        """The task's transitions, oldest first; ``lenient`` (a view): a detail that will not decode is {}."""
        rows = self._query("SELECT machine, run, from_state, to_state, event, detail, created_at FROM transitions"
                           " WHERE task_id = ? ORDER BY id", (task_id,))
        return [{"machine": r[0], "run": r[1], "from_state": r[2], "to_state": r[3], "event": r[4],
                 "detail": _detail(r[5], lenient), "timestamp": r[6]} for r in rows]

    def audit(self, task_id: str) -> list[dict[str, Any]]:
        rows = self._query("SELECT audit_id, task_id, level, event_type, payload, created_at FROM audit"
                           " WHERE task_id = ? ORDER BY rowid", (task_id,))
        return [{"audit_id": r[0], "task_id": r[1], "level": r[2], "event_type": r[3],
                 "payload": json.loads(r[4]), "created_at": r[5]} for r in rows]

    def journal(self, task_id: str) -> dict[str, dict[str, Any]]:
        rows = self._query(f"SELECT {_JOURNAL} FROM journal WHERE task_id = ?", (task_id,))
        return {row[0]: _journal_row(row) for row in rows}

    def claimed(self, scope: str, key: str) -> dict[str, Any] | None:
        """The task an idempotency key stands for: task_id, fingerprint, created_at (None: unused)."""
        rows = self._query("SELECT task_id, fingerprint, created_at FROM idempotency WHERE scope = ? AND key = ?",
                           (scope, key))
        return dict(zip(("task_id", "fingerprint", "created_at"), rows[0])) if rows else None

    def effects_unknown(self, task_id: str, *, run_over: bool) -> list[dict[str, Any]]:
        """The task's effectful steps that started and whose outcome is unknown, in start order.

        ``interrupted`` rows always; ``started`` rows too when the task's run is over
        (``run_over``: nothing will finish them).
        """
        statuses = (INTERRUPTED_STATUS, STARTED) if run_over else (INTERRUPTED_STATUS,)
        rows = self._query(f"SELECT key, step_index, tool, run, started_at FROM journal WHERE task_id = ? AND status"
                           f" IN ({', '.join('?' * len(statuses))}) ORDER BY started_at, key", (task_id, *statuses))
        return [dict(zip(("key", "step_index", "tool", "run", "started_at"), row)) for row in rows]

    def usage_totals(self) -> list[dict[str, Any]]:
        """The model usage of every task so far, per model and tier (what ``pegasus stats`` sums)."""
        rows = self._query(f"SELECT {', '.join(USAGE_COLUMNS)} FROM usage_totals ORDER BY model, tier", ())
        return [dict(zip(USAGE_COLUMNS, row, strict=True)) for row in rows]

    def metric_facts(self) -> dict[str, Any]:
        """The store's counts for ``/metrics`` (``pegasus.store.metric_facts``), folded since the last call."""
        tally = self.__dict__.setdefault("_metric_tally", Tally())  # this Store's: one per supervisor
        return metric_facts(self._query, tally)

    def seq_high_water(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM tasks", ())[0][0])

    def bytes_for(self, task_id: str) -> int:
        """Bytes this task's rows take in checkpoints, transitions and journal (payload columns)."""
        total = 0
        for sql in ("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM checkpoints WHERE task_id = ?",
                    "SELECT COALESCE(SUM(LENGTH(detail) + LENGTH(event) + LENGTH(from_state) + LENGTH(to_state)), 0)"
                    " FROM transitions WHERE task_id = ?",
                    "SELECT COALESCE(SUM(LENGTH(result) + LENGTH(key)), 0) FROM journal WHERE task_id = ?"):
            total += int(self._query(sql, (task_id,))[0][0])
        return total

_PACKED = {"metadata", "result", "pending_resume"}
_TASKS = ", ".join(TASK_COLUMNS)
_TEXT = frozenset({"task_id", "machine", "lifecycle_state", "cognitive_state", "exit_reason", "error", "input",
                   "source", "created_at", "updated_at"})
# Text read as bytes: a value that is not UTF-8 (a bug's, raw SQL's) fails its own row, not the whole query.
_TASKS_RAW = ", ".join(f"CAST({c} AS BLOB)" if c in _TEXT else c for c in TASK_COLUMNS)
_JOURNAL = ", ".join(JOURNAL_COLUMNS)


USAGE_COLUMNS = ("model", "tier", "calls", "prompt_tokens", "cached_tokens", "completion_tokens", "total_tokens",
                 "cost_usd", "unpriced_calls", "estimated_calls")


def _usage_row(usage: dict[str, Any]) -> tuple[Any, ...]:
    """One stage's usage (``UsageMeter.as_dict``) as the parameters that add it to its model's totals; an
    unpriced stage adds no cost, and its estimated calls (the server reported no usage) are counted as such."""
    def number(key: str) -> int:
        value = usage.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    reported = usage.get("cost_usd")
    cost = float(reported) if isinstance(reported, (int, float)) and not isinstance(reported, bool) else None
    unpriced = number("calls") if cost is None else number("unpriced_calls")
    return (str(usage.get("model") or ""), str(usage.get("tier") or "default"), number("calls"),
            number("prompt_tokens"), number("cached_tokens"), number("completion_tokens"), number("total_tokens"),
            cost, unpriced, number("estimated_calls"))


def audit_row(task_id: str, event_type: str, payload: dict[str, Any], stamp: str) -> tuple[Any, ...]:
    return (_audit_id(), task_id, event_type, json.dumps(payload, default=str), stamp)


def _tier(row: dict[str, Any]) -> dict[str, Any]:
    """A new task's tier as its TASK_CREATED rows note it (nothing without one)."""
    return {"tier": row["tier"]} if row.get("tier") else {}


def _encode_updates(updates: dict[str, Any]) -> dict[str, Any]:
    unknown = set(updates) - set(TASK_COLUMNS)
    if unknown:
        raise StoreError(f"unknown task column(s) {sorted(unknown)}")
    return {k: (pack(v) if k in _PACKED and v is not None else v) for k, v in updates.items()}


def _filters(state: str | None, text: str | None = None,
             metadata: dict[str, str] | None = None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its parameters) of tasks in ``state`` (lifecycle or cognitive), holding every word
    of ``text``, with these ``metadata`` values."""
    where, params = search.conditions(text, metadata)
    if state is not None:
        where.insert(0, "(lifecycle_state = ? OR cognitive_state = ?)")
        params[:0] = [state, state]
    return (f" WHERE {' AND '.join(where)}" if where else ""), tuple(params)


def _task_row(row: tuple[Any, ...], *, lenient: bool = False) -> dict[str, Any]:
    """A task row (text columns as bytes when read with ``_TASKS_RAW``), decoded; ``lenient``: text that is not
    UTF-8 is shown with replacement characters and a packed value that will not decode as None (a quarantined
    task's row -- its error says why -- is still shown)."""
    out = dict(zip(TASK_COLUMNS, row))
    for key in _TEXT & out.keys():
        if isinstance(out[key], bytes):
            out[key] = out[key].decode("utf-8", "replace" if lenient else "strict")
    for key in _PACKED:
        try:
            out[key] = unpack(out[key])
        except codec.UNPACK_ERRORS:
            if not lenient:
                raise
            out[key] = None
    return out


def _detail(data: bytes | None, lenient: bool) -> dict[str, Any]:
    try:
        return unpack(data) or {}
    except codec.UNPACK_ERRORS:
        if not lenient:
            raise
        return {}


def _journal_row(row: tuple[Any, ...]) -> dict[str, Any]:
    out = dict(zip(JOURNAL_COLUMNS, row))
    out["result"] = unpack(out["result"])
    return out
