"""A state directory's store read with no system running: ``status``, ``history``, ``tree``, ``list``
and ``logs`` answer from the file, as the supervisor would.

``StoreReader`` is a ``Store`` on a read-only connection (SQLite's ``mode=ro``): it never
migrates or writes, so it is safe beside a running system.  ``answer_read(reader, request)``
answers a read request (``READS``).  It must not take a lock beyond a read, or import ``actors``.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from pegasus import requests as r
from pegasus.store import integrity, reflections, task_log
from pegasus.store.errors import StoreError
from pegasus.store.pending import PendingWrites
from pegasus.store.schema import SCHEMA_VERSION, TABLES
from pegasus.store.sqlite import DB_FILE, Store
from pegasus.store.task_ids import full_task_id
from pegasus.task.errors import TaskNotFoundError
from pegasus.views import history_view, stored_view

TREE_DEPTH = 16  # levels a tree shows, as the supervisor's


class StoreReader(Store):
    """The store file opened read-only (see the module docstring)."""

    def __init__(self, path: Path | str, *, timeout_s: float = 10.0) -> None:  # noqa: D107 - not Database's open
        self.path = Path(path)
        self._depth, self.identity, self._header_fd = 0, None, None
        self.pending = PendingWrites()  # never filled: nothing is written here
        if not self.path.is_file():
            raise StoreError(f"no store at {self.path}")
        integrity.check_header(self.path)
        try:
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s,
                                      isolation_level=None, check_same_thread=False)
            version = self.schema_version()
            if version != SCHEMA_VERSION:
                self.db.close()
                raise StoreError(f"store {self.path} has schema version {version}, this Pegasus reads "
                                 f"{SCHEMA_VERSION}: start its system once (pegasus start) to bring it up to date")
            integrity.check_tables(self.db, self.path, TABLES)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read store {self.path}: {exc}") from None

    @classmethod
    def of_state_dir(cls, state_dir: Path | str) -> StoreReader:
        return cls(Path(state_dir) / DB_FILE)

    def _begin(self) -> None:
        raise StoreError(f"store {self.path} is open read-only")


def answer_read(reader: Store, request: r.Request[Any], max_attempts: int | None = None) -> Any:
    """What the supervisor answers ``request`` (one of ``READS``), from the store alone (``max_attempts``: the
    settings' [retry] one, which a task's view carries)."""
    answer = ANSWERS.get(type(request))
    if answer is None:
        raise ValueError(f"{type(request).__name__} is not a read of the store")
    return answer(reader, request, max_attempts)


def _list(reader: Store, request: r.ListTasks, max_attempts: int | None) -> Any:
    found = (request.text, request.metadata)  # pegasus.store.search, as the supervisor asks it
    return {"tasks": reader.list_tasks(request.state, request.limit, request.offset, request.before, *found),
            "total": reader.count_tasks(request.state, *found), "offset": request.offset, "limit": request.limit}


def _log(reader: Store, request: r.TaskLog, max_attempts: int | None) -> Any:
    task_id = full_task_id(reader._query, request.task_id)
    return task_log.task_log(reader, request.model_copy(update={"task_id": task_id}), time.time())


def _tree(reader: Store, request: r.Tree, max_attempts: int | None) -> Any:
    return subtree(reader, full_task_id(reader._query, request.task_id))


def _history(reader: Store, request: r.History, max_attempts: int | None) -> Any:
    task_id, _ = _stored(reader, request.task_id)
    return {**history_view(task_id, reader.transitions(task_id, lenient=True), reader.audit(task_id)),
            "post_reflection": reflections.reflection_of(reader, task_id)}


def _get(reader: Store, request: r.Get, max_attempts: int | None) -> Any:
    task_id, row = _stored(reader, request.task_id)
    link = reader.link_of(task_id)
    return {**stored_view(task_id, row, reader.transitions(task_id, lenient=True)),
            "messages": reader.conversation(task_id),
            "post_reflection": reflections.reflection_of(reader, task_id),
            "effects_unknown": reader.effects_unknown(task_id, run_over=True),
            "parent_id": link.parent_id if link else None, "depth": link.depth if link else 0,
            "children": [child.child_id for child in reader.children_of(task_id)], "waiting_for": [],
            "messages_quarantined": reader.quarantined_messages(task_id), "max_attempts": max_attempts}


def _stored(reader: Store, given: str) -> tuple[str, Any]:
    """The whole id of the task ``given`` (a prefix may do) and its row; TaskNotFoundError when there is none."""
    task_id = full_task_id(reader._query, given)
    row = reader.task_row(task_id, lenient=True)
    if row is None:
        raise TaskNotFoundError(task_id)
    return task_id, row


# Each read and its answer, by the request's class.
ANSWERS: dict[type[Any], Callable[[Store, Any, int | None], Any]] = {
    r.Get: _get, r.History: _history, r.ListTasks: _list, r.Tree: _tree, r.TaskLog: _log,
}
READS = tuple(ANSWERS)  # what answer_read answers


def subtree(reader: Store, task_id: str, depth_left: int = TREE_DEPTH) -> dict[str, Any]:
    """The task and its descendants as the store has them (the supervisor's ``Tree`` answer)."""
    row = reader.task_row(task_id, lenient=True)
    if row is None:
        raise TaskNotFoundError(task_id)
    node = {"task_id": task_id, "lifecycle_state": row["lifecycle_state"], "state": row["cognitive_state"],
            "input": row["input"], "result": row["result"], "error": row["error"], "waiting": False}
    node["children"] = [{**subtree(reader, link.child_id, depth_left - 1), "step_index": link.step_index}
                        for link in reader.children_of(task_id)] if depth_left > 0 else []
    return node
