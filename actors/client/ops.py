"""``Client``'s operator requests: a task's log, deleting a task's tree, purging old ones.

    client.logs(task_id)                      # transitions, stage errors, step-downs, tool output, in order
    client.delete(task_id)                    # the task and its sub-tasks, all finished, in one transaction
    client.purge(30, state="done")            # the finished trees last changed more than 30 days ago
"""

from __future__ import annotations

from typing import Any

from actors import messages as m
from pegasus.requests import R


class OpsClient:
    """Logs and retention of ``actors.client.Client`` (see the module docstring)."""

    def ask(self, request: m.Request[R]) -> R:  # Client's
        raise NotImplementedError

    def logs(self, task_id: str, after: int = 0) -> dict[str, Any]:
        """The task's log after transition ``after``: ``entries`` (transitions, stage errors, model step-downs,
        tool output) in order, ``next`` (the cursor for more), ``finished`` (nothing more will come)."""
        return self.ask(m.TaskLog(task_id=task_id, after=after))

    def delete(self, task_id: str) -> dict[str, Any]:
        """Delete the task and its sub-tasks (all finished, else refused), in one transaction; ``deleted``: ids."""
        return self.ask(m.DeleteTask(task_id=task_id))

    def purge(self, older_than_days: float, state: str | None = None) -> dict[str, Any]:
        """Delete the finished task trees last changed more than ``older_than_days`` ago (only ``state``'s),
        1000 trees a request, asked again while ``more``; ``count``: tasks deleted in all."""
        total: dict[str, Any] = {"deleted": [], "count": 0, "skipped": 0}
        while True:
            page = self.ask(m.Purge(older_than_days=float(older_than_days), state=state))  # type: ignore[arg-type]
            total = {"deleted": total["deleted"] + page["deleted"], "count": total["count"] + page["count"],
                     "skipped": total["skipped"] + page["skipped"]}
            if not page["more"] or not page["count"]:
                return total
