"""Deleting finished tasks: one task's tree (``pegasus delete``), the old ones (``pegasus purge``,
``[store] retain_days``), each in one transaction.

A tree is deleted only when every task in it has ended (a sub-task only once its parent has too),
and everything the store keeps of it goes, its memory aside (docs/durability.md).  The handlers are
plain functions ``(store, request, now) -> reply``; ``sweep_delay`` and ``cutoff`` are the retention
timer's policy, pure functions of the clock.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pegasus.errors import PegasusError
from pegasus.store import search

TERMINAL = ("done", "failed", "canceled")
SWEEP_PERIOD_S = 3600.0  # the retention sweep runs on each hour of the clock
MAX_PURGE = 1000  # task trees deleted by one purge (one transaction); ``more`` says to ask again
DAY_S = 86400.0

# Every table that keeps rows of a task by its id (memory's tables are not here: kept unless forgotten).
_BY_TASK = ("checkpoints", "transitions", "audit", "journal", "idempotency", "task_messages", "post_reflections")


class TaskTreeNotFinished(PegasusError):
    """A delete refused: a task of the tree (or the sub-task's parent) has not ended."""


def cutoff(now: float, days: float) -> str:
    """The ``updated_at`` before which a task is older than ``days`` at ``now`` (ISO, UTC, as the store writes)."""
    return datetime.fromtimestamp(max(0.0, now - days * DAY_S), timezone.utc).isoformat()


def sweep_delay(now: float, period_s: float = SWEEP_PERIOD_S) -> float:
    """Seconds from ``now`` to the next sweep: the next whole ``period_s`` of the clock (a restart keeps the beat)."""
    return period_s - (now % period_s) or period_s


def sweep_request(retain_days: float) -> dict[str, Any] | None:
    """What the timer purges (``purge``'s fields), or None when retention is off (``retain_days`` 0)."""
    return {"older_than_days": retain_days, "state": None} if retain_days > 0 else None


def tree_ids(store: Any, task_id: str) -> list[str]:
    """The task and every task under it, root first."""
    rows = store._query("WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT child_id FROM subtasks JOIN tree"
                        " ON parent_id = tree.id) SELECT id FROM tree", (task_id,))
    return [row[0] for row in rows]


def _states(store: Any, ids: list[str]) -> dict[str, str]:
    states: dict[str, str] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = store._query(f"SELECT task_id, lifecycle_state FROM tasks WHERE task_id IN"
                            f" ({', '.join('?' * len(chunk))})", tuple(chunk))
        states.update({row[0]: row[1] for row in rows})
    return states


def refusal(store: Any, task_id: str) -> str | None:
    """Why the tree under ``task_id`` may not be deleted now (None: it may)."""
    ids = tree_ids(store, task_id)
    states = _states(store, ids)
    busy = [f"{tid} ({state})" for tid, state in states.items() if state not in TERMINAL]
    if busy:
        return (f"task {task_id}'s tree has {len(busy)} task(s) not finished: {', '.join(busy[:5])}"
                f"{' ...' if len(busy) > 5 else ''}; cancel them or wait for them to end")
    parent = store._query("SELECT parent_id FROM subtasks WHERE child_id = ?", (task_id,))
    if parent:
        parent_state = _states(store, [parent[0][0]]).get(parent[0][0])
        if parent_state is not None and parent_state not in TERMINAL:
            return (f"task {task_id} is a sub-task of {parent[0][0]}, which is {parent_state}: "
                    "delete the parent's tree once it has ended")
    return None


def _delete(db: Any, ids: list[str]) -> None:
    """Every row of these tasks, inside the caller's transaction."""
    search.forget(db, ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        for table in _BY_TASK:
            db.execute(f"DELETE FROM {table} WHERE task_id IN ({marks})", chunk)
        db.execute(f"DELETE FROM subtasks WHERE child_id IN ({marks}) OR parent_id IN ({marks})", chunk + chunk)
        db.execute(f"DELETE FROM tasks WHERE task_id IN ({marks})", chunk)


def delete_tree(store: Any, request: Any, now: float) -> dict[str, Any]:
    """``DeleteTask``: the tree under ``request.task_id``, all of it or nothing (``deleted``: its ids)."""
    from pegasus.task.errors import TaskNotFoundError  # the kind a missing task is answered with everywhere
    task_id = request.task_id
    with store.transaction():  # the check and the delete see one state of the store
        if not _states(store, [task_id]):
            raise TaskNotFoundError(task_id)
        reason = refusal(store, task_id)
        if reason is not None:
            raise TaskTreeNotFinished(reason)
        ids = tree_ids(store, task_id)
        _delete(store.db, ids)
    return {"task_id": task_id, "deleted": ids, "count": len(ids)}


def purge(store: Any, request: Any, now: float) -> dict[str, Any]:
    """``Purge``: the trees whose root ended (in ``request.state`` if given) before ``older_than_days`` ago,
    oldest first, at most ``limit`` trees, each whole or not at all (one not finished under it is skipped)."""
    states = (request.state,) if request.state else TERMINAL
    limit = min(getattr(request, "limit", MAX_PURGE), MAX_PURGE)
    deleted: list[str] = []
    skipped = 0
    with store.transaction():
        roots = store._query(
            f"SELECT task_id FROM tasks WHERE lifecycle_state IN ({', '.join('?' * len(states))})"
            " AND updated_at < ? AND task_id NOT IN (SELECT child_id FROM subtasks) ORDER BY updated_at LIMIT ?",
            (*states, cutoff(now, request.older_than_days), limit + 1))
        more = len(roots) > limit
        for (root,) in roots[:limit]:
            if refusal(store, root) is not None:
                skipped += 1
                continue
            ids = tree_ids(store, root)
            _delete(store.db, ids)
            deleted += ids
    return {"deleted": deleted, "count": len(deleted), "skipped": skipped, "more": more}
