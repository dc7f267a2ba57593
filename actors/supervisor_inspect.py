"""The supervisor's answer to ``TaskContextRequest``: a task's context rebuilt from its checkpoints in the store.

A mixin of ``actors.supervisor.Supervisor``. The store is the truth for a task's context between two
checkpoints (its run is a passivated snapshot somewhere on a task actor), so the answer is the
context as of the last checkpoint: after the plan, after each tool step, at the end.
"""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.views import context_view
from pegasus.store.checkpoint import rebuild
from pegasus.task import TaskNotFoundError


class Inspection:
    """The handler (see the module docstring)."""

    store: Any

    @request_handler
    def receiveMsg_TaskContextRequest(self, request: m.TaskContextRequest, sender: Any) -> Any:
        assert self.store is not None
        if self.store.task_row(request.task_id) is None:
            raise TaskNotFoundError(request.task_id)
        rows = self.store.checkpoints(request.task_id)
        return context_view(request.task_id, rebuild(request.task_id, rows) if rows else None)
