"""What an operator asks of the store: a task's log, deleting, purging, and the retention timer.

Each request is a plain function of ``pegasus.store`` (``(store, request, now) -> reply``: ``task_log``,
``retention``) in a row here.  The retention timer's policy is ``retention.sweep_delay`` and
``sweep_request``: pure functions of the clock and ``[store] retain_days``.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from actors import messages as m
from actors.supervisor.context import Context, Rows
from pegasus.store import retention, task_log


def log_of(ctx: Context, request: m.TaskLog) -> Any:
    return task_log.task_log(ctx.configured[1], request, time.time())


def delete_task(ctx: Context, request: m.DeleteTask) -> Any:
    return _forgotten(ctx, retention.delete_tree(ctx.configured[1], request, time.time()))


def purge(ctx: Context, request: m.Purge) -> Any:
    return _forgotten(ctx, retention.purge(ctx.configured[1], request, time.time()))


def _forgotten(ctx: Context, reply: dict[str, Any]) -> dict[str, Any]:
    """A deleted task's record leaves Admission's memory too (a failed one is kept there for a retry)."""
    assert ctx.admission is not None
    for task_id in reply["deleted"]:
        ctx.admission.records.pop(task_id, None)
    return reply


def retention_timer(ctx: Context) -> None:
    """Arm the next sweep (on each hour of the clock) when ``[store] retain_days`` is set."""
    if ctx.settings is not None and retention.sweep_request(ctx.settings.store.retain_days) is not None:
        ctx.wake(retention.sweep_delay(time.time()), m.RetentionDue())


def retention_due(ctx: Context, due: m.RetentionDue) -> None:
    asked = retention.sweep_request(ctx.settings.store.retain_days) if ctx.settings is not None else None
    if asked is not None and ctx.store is not None and ctx.admission is not None:
        try:
            done = _forgotten(ctx, retention.purge(ctx.store, SimpleNamespace(**asked), time.time()))
            ctx.log.info("retention_sweep", deleted=done["count"], skipped=done["skipped"], more=done["more"])
        except Exception as exc:  # noqa: BLE001 - a failed sweep is tried again at the next one
            ctx.log.error("retention_sweep_failed", error=f"{type(exc).__name__}: {exc}")
    retention_timer(ctx)


REQUESTS: Rows = {m.TaskLog: log_of, m.DeleteTask: delete_task, m.Purge: purge}
