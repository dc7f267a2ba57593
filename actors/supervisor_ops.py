"""The supervisor's hooks for what an operator asks of the store: a task's log, deleting, purging, retention.

A mixin of ``actors.supervisor.Supervisor``.  Each handler is a plain function of ``pegasus.store``
(``(store, request, now) -> reply``: ``task_log``, ``retention``), hooked here in two lines, so a table of
store-only requests can take them as they are.  The retention timer's policy is ``retention.sweep_delay``
and ``sweep_request``: pure functions of the clock and ``[store] retain_days``.
"""

from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.store import retention, task_log


class OpsRequests:
    """Handlers of the supervisor for logs and retention (see the module docstring)."""

    admission: Any
    store: Any
    settings: Any
    log: Any
    wakeupAfter: Any  # noqa: N815 - Thespian's name

    @request_handler
    def receiveMsg_TaskLog(self, request: m.TaskLog, sender: Any) -> Any:
        return task_log.task_log(self.store, request, time.time())

    @request_handler
    def receiveMsg_DeleteTask(self, request: m.DeleteTask, sender: Any) -> Any:
        return self._forgotten(retention.delete_tree(self.store, request, time.time()))

    @request_handler
    def receiveMsg_Purge(self, request: m.Purge, sender: Any) -> Any:
        return self._forgotten(retention.purge(self.store, request, time.time()))

    def _forgotten(self, reply: dict[str, Any]) -> dict[str, Any]:
        """A deleted task's record leaves Admission's memory too (a failed one is kept there for a retry)."""
        for task_id in reply["deleted"]:
            self.admission.records.pop(task_id, None)
        return reply

    def _retention_timer(self) -> None:
        """Arm the next sweep (on each hour of the clock) when ``[store] retain_days`` is set."""
        if self.settings is not None and retention.sweep_request(self.settings.store.retain_days) is not None:
            self.wakeupAfter(timedelta(seconds=retention.sweep_delay(time.time())), payload=m.RetentionDue())

    def _retention_due(self) -> None:
        asked = retention.sweep_request(self.settings.store.retain_days)
        if asked is not None and self.store is not None and self.admission is not None:
            try:
                done = self._forgotten(retention.purge(self.store, SimpleNamespace(**asked), time.time()))
                self.log.info("retention_sweep", deleted=done["count"], skipped=done["skipped"], more=done["more"])
            except Exception as exc:  # noqa: BLE001 - a failed sweep is tried again at the next one
                self.log.error("retention_sweep_failed", error=f"{type(exc).__name__}: {exc}")
        self._retention_timer()
