"""The supervisor's handlers for the task tree: ``tree`` requests, and the tree in ``status``.

A mixin of ``actors.supervisor.Supervisor``; the policy (fan-out, fan-in,
limits, cancel) is ``pegasus.admission.tree``'s, reached through Admission.
"""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.admission.tree import waiting_steps


class TreeRequests:
    """Handlers of the supervisor for the task tree (see the module docstring)."""

    admission: Any

    @request_handler
    def receiveMsg_Tree(self, request: m.Tree, sender: Any) -> Any:
        assert self.admission is not None
        return self.admission.tree.subtree(request.task_id)

    def _tree_view(self, task_id: str) -> dict[str, Any]:
        """What ``status`` shows of the tree: parent, depth, children, the ones still awaited."""
        assert self.admission is not None
        return dict(self.admission.tree.view_of(task_id))

    def _listed_with_tree(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A page of ``list``: each task with its parent and whether it waits for its sub-tasks (the
        dashboard nests sub-tasks and tells a parent waiting for them from a task waiting for a person)."""
        assert self.admission is not None
        records = self.admission.records
        parents = self.admission.store.parents_of([task["task_id"] for task in tasks])
        for task in tasks:
            record = records.get(task["task_id"])
            task["parent_id"] = parents.get(task["task_id"])
            task["waiting_for_children"] = bool(record is not None and waiting_steps(record))
        return tasks
