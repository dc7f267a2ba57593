"""The post-task reflector's rows: which done tasks are reflected, which still must be.

One row per done task: ``running``, ``complete`` (written with its memories), ``failed`` (the task
stays done) or ``skipped``.  A done task with no row or a ``running`` one is pending, so a crash
before the commit runs it once more and one after it never again.  Functions over the
supervisor's Store (the only writer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pegasus import codec
from pegasus.store.quarantine import reason, sift
from pegasus.store.database import now_iso
from pegasus.store.sqlite import Store, audit_row, unpack
from pegasus.task.events import EventType
from pegasus.task.names import LifecycleState

RUNNING, COMPLETE, FAILED, SKIPPED = "running", "complete", "failed", "skipped"


def pending(store: Store) -> list[tuple[str, int]]:
    """(task, attempts so far) of every done task whose reflection is not over, oldest first."""
    rows = store._query("SELECT t.task_id, COALESCE(r.attempts, 0) FROM tasks t LEFT JOIN post_reflections r"
                        " ON r.task_id = t.task_id WHERE t.lifecycle_state = ? AND (r.status IS NULL OR"
                        " r.status = ?) ORDER BY t.seq", (LifecycleState.DONE.value, RUNNING))
    def set_aside(row: tuple[Any, ...], error: str) -> None:  # e.g. attempts written as text by a bug
        finished(store, str(row[0]), FAILED, error=error)

    return list(sift(rows, lambda row: (str(row[0]), int(row[1])), set_aside))


def started(store: Store, task_id: str) -> int:
    """Count one more attempt (the row ``running``); the attempts so far, this one included.  One statement,
    so no savepoint in the supervisor's group (atomic on its own, ``Database.deferred``)."""
    with store.deferred():  # fetchall: a RETURNING statement run to its end before anything else
        row, = store.db.execute("INSERT INTO post_reflections (task_id, status, attempts, updated_at)"
                               " VALUES (?, ?, 1, ?) ON CONFLICT (task_id) DO UPDATE SET attempts = attempts + 1,"
                               " updated_at = excluded.updated_at RETURNING attempts",
                               (task_id, RUNNING, now_iso())).fetchall()
    return int(row[0])


def finished(store: Store, task_id: str, status: str, *, reflection: dict[str, Any] | None = None,
             error: str | None = None, write: Callable[[], list[str]] | None = None) -> list[str]:
    """Mark the reflection over -- ``write`` (the memory writes: their ids) in the same transaction --
    with REFLECTION_COMPLETE / REFLECTION_FAILED in the task's audit log.  A ``write`` that raises
    leaves nothing written (the caller records the failure instead)."""
    marker = (task_id, status, codec.pack(reflection) if reflection is not None else None, error, now_iso())
    if write is None:  # the marker alone: one statement, atomic on its own (no savepoint, nothing flushed early)
        with store.deferred() as waiting:
            store.db.execute(_MARKER, marker)
            if status != SKIPPED:  # its audit row waits with the group's (pegasus.store.pending)
                waiting.audit.append(audit_row(task_id, *_audited(status, [], reflection, error), marker[-1]))
        return []
    # One savepoint in a group: the memory store's own transactions nest inside it, and a write that raises
    # undoes them all with the marker (a bare transaction cannot hold another).  Memory's tables only: the
    # group's waiting rows keep waiting, and the audit row waits after them (``Database.apart``).
    with store.group(), store.apart() as db:
        written = write()
        db.execute(_MARKER, marker)
        if status != SKIPPED:
            store.pending.audit.append(audit_row(task_id, *_audited(status, written, reflection, error), marker[-1]))
    return written


_MARKER = ("INSERT INTO post_reflections (task_id, status, attempts, reflection, error, updated_at)"
           " VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET status = excluded.status,"
           " reflection = excluded.reflection, error = excluded.error, updated_at = excluded.updated_at")


def _audited(status: str, written: list[str], reflection: dict[str, Any] | None,
             error: str | None) -> tuple[str, dict[str, Any]]:
    """The audit row's event and payload of a reflection over (none is written for a skipped one)."""
    event = EventType.REFLECTION_COMPLETE if status == COMPLETE else EventType.REFLECTION_FAILED
    return event.value, ({"memories": written, "error": error} if error else
                         {"memories": written, "assessment": (reflection or {}).get("assessment", "")})


def reflection_of(store: Store, task_id: str) -> dict[str, Any] | None:
    """The task's reflection row (status, attempts, the PostTaskReflection, error), None when it has none."""
    rows = store._query("SELECT status, attempts, reflection, error, updated_at FROM post_reflections"
                        " WHERE task_id = ?", (task_id,))
    if not rows:
        return None
    status, attempts, data, error, updated_at = rows[0]
    try:
        reflection = unpack(data)
    except Exception as exc:  # noqa: BLE001 - shown with its error, never a failed view
        reflection, error = None, reason(exc)
    return {"status": status, "attempts": attempts, "reflection": reflection, "error": error,
            "updated_at": updated_at}
