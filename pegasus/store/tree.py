"""The task tree's tables: which task a sub-task answers, and the parent's plan-step ends it writes.

A mixin of ``pegasus.store.Store``.  A child's link row is written with the child, so a child
exists exactly when its link does, and its unique ``step_key`` keeps a step from having two
children.  A child's end goes into the parent's journal under that key, replayed as the step's
result like a finished tool step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pegasus.store.database import now_iso
from pegasus.store.journal import FINISHED


@dataclass(frozen=True)
class Link:
    """A sub-task: its parent, its depth (a submitted task is 0) and the parent's step it answers."""

    child_id: str
    parent_id: str
    depth: int
    step_key: str
    step_index: int


_LINK = "child_id, parent_id, depth, step_key, step_index"


class TreeTables:
    """The ``subtasks`` table and the parent-step ends (see the module docstring)."""

    _query: Any
    transaction: Any

    def link_of(self, child_id: str) -> Link | None:
        if child_id in self._unlinked:  # created here with no link (a link is only ever written with its child)
            self._unlinked.discard(child_id)  # asked once, at its end, most often: the set stays small
            return None
        rows = self._query(f"SELECT {_LINK} FROM subtasks WHERE child_id = ?", (child_id,))
        return Link(*rows[0]) if rows else None

    def is_sub_task(self, task_id: str) -> bool:
        """Whether a parent waits for ``task_id``'s end; unlike ``link_of`` it leaves the task's unread answer."""
        if task_id in self._unlinked:
            return False
        return bool(self._query("SELECT 1 FROM subtasks WHERE child_id = ? LIMIT 1", (task_id,)))

    @property
    def _unlinked(self) -> set[str]:
        """Tasks this store created with no link and not yet asked about: ``link_of`` answers them unread."""
        return self.__dict__.setdefault("_unlinked_tasks", set())  # type: ignore[no-any-return]

    def parents_of(self, task_ids: list[str]) -> dict[str, str]:
        """The parent of each of ``task_ids`` that is a sub-task (one query for a page of ``list``)."""
        parents: dict[str, str] = {}
        for at in range(0, len(task_ids), 500):  # under SQLite's bound on a statement's parameters
            chunk = task_ids[at:at + 500]
            rows = self._query(f"SELECT child_id, parent_id FROM subtasks WHERE child_id IN ({', '.join('?' * len(chunk))})",
                               tuple(chunk))
            parents.update((child, parent) for child, parent in rows)
        return parents

    def children_of(self, parent_id: str) -> list[Link]:
        """The task's children, in the order they were created."""
        rows = self._query(f"SELECT {_LINK} FROM subtasks WHERE parent_id = ? ORDER BY rowid", (parent_id,))
        return [Link(*row) for row in rows]

    def finish_step(self, task_id: str, run: int, key: str, step_index: int, result: bytes) -> bool:
        """Write the end of a parent's sub_task step; the first end stays (False: it had one)."""
        stamp = now_iso()
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO journal (key, task_id, run, step_index, tool, effect, status, result, started_at,"
                " finished_at) VALUES (?, ?, ?, ?, 'sub_task', 'effectful', ?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET status = excluded.status, result = excluded.result,"
                " finished_at = excluded.finished_at WHERE journal.status = 'started'",
                (key, task_id, run, step_index, FINISHED, result, stamp, stamp))
            return bool(cursor.rowcount)


def insert_link(db: Any, link: Link) -> None:
    """The link row of a child being created (inside ``create_task``'s transaction)."""
    db.execute(f"INSERT INTO subtasks ({_LINK}, created_at) VALUES (?, ?, ?, ?, ?, ?)",
               (link.child_id, link.parent_id, link.depth, link.step_key, link.step_index, now_iso()))
