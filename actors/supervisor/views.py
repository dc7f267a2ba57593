"""What ``get`` (and every request that changes a task) answers, and suspensions answered once they land."""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.supervisor.context import Context
from pegasus.store import reflections
from pegasus.task import CognitiveState, LifecycleState, TaskNotFoundError
from pegasus.tracing import task_trace
from pegasus.views import stored_view


def task_view(ctx: Context, task_id: str) -> dict[str, Any]:
    """The live record, or (done, canceled, from before a restart) the store."""
    settings, store, admission = ctx.configured
    record = admission.records.get(task_id)
    view = record.view() if record is not None else _stored(ctx, task_id)
    view["max_attempts"] = settings.retry.max_attempts  # a failed task is retried while attempts are fewer
    # Effectful steps that started and whose outcome is unknown (see pegasus.store.journal).
    view["effects_unknown"] = store.effects_unknown(task_id, run_over=view["lifecycle_state"] != LifecycleState.RUNNING)
    view.update(admission.tree.view_of(task_id))  # parent, depth, children, waiting_for
    view["messages_quarantined"] = store.quarantined_messages(task_id)  # set aside, with their errors
    # The trace its spans are sent in ([telemetry]: actors/telemetry.py); None while tracing is off.
    view["trace_id"] = task_trace(task_id, view.get("metadata")).trace_id if settings.telemetry.enabled else None
    return view


def _stored(ctx: Context, task_id: str) -> dict[str, Any]:
    """A task from before this system started (done, failed or canceled): straight from the store."""
    _, store, _ = ctx.configured
    row = store.task_row(task_id, lenient=True)  # a quarantined task's bad column: shown as None
    if row is None:
        raise TaskNotFoundError(task_id)
    return {**stored_view(task_id, row, store.transitions(task_id, lenient=True)),
            "messages": store.conversation(task_id),
            "post_reflection": reflections.reflection_of(store, task_id)}


def answer_suspends(ctx: Context, task_id: str) -> None:
    """The suspend requests of a task whose run has stopped: suspended, or ended first."""
    waiting = ctx.pending_suspend.get(task_id)
    if not waiting or ctx.admission is None:
        return
    record = ctx.admission.records.get(task_id)
    if record is not None and record.state == LifecycleState.RUNNING:
        return  # still going: the suspension has not landed yet
    del ctx.pending_suspend[task_id]
    for client, request_id in waiting:
        if record is not None and record.state == LifecycleState.BLOCKED and record.snapshot.state == CognitiveState.SUSPENDED:
            ctx.send(client, m.Reply(request_id, True, data=record.view()))
        else:
            state = record.state if record is not None else task_view(ctx, task_id)["lifecycle_state"]
            ctx.send(client, m.Reply(request_id, False, error_type="InvalidStateTransition",
                                     error=f"task {task_id} ended ({state}) before it was suspended"))
