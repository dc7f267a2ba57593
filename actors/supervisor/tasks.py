"""The requests about tasks: each checked here, decided by Admission (``admit``), answered with the task's view."""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor.commands import admit, carry_out, stepped
from actors.supervisor.context import Context, Rows
from actors.supervisor.replies import DEFERRED
from actors.supervisor.views import answer_suspends, task_view
from pegasus.admission import Command, MessageAccepted, Submitted
from pegasus.admission import inputs as i
from pegasus.admission.tree import waiting_steps
from pegasus.store import reflections
from pegasus.submission import check_batch_size, check_task, check_tier, numbered
from pegasus.task import TaskNotFoundError
from pegasus.views import history_view


def submit(ctx: Context, request: m.Submit, sender: ActorAddress) -> Any:
    _, store, _ = ctx.configured
    machine, _ = _checked(ctx, request)
    with store.group():  # created, approved, queued, maybe running: one commit, before the reply
        [made] = _created(ctx, stepped(ctx, _input(request, machine)), [request], sender)
    return {**task_view(ctx, made.task_id), "existing": made.existing}


def submit_many(ctx: Context, request: m.SubmitMany, sender: ActorAddress) -> Any:
    """Every task checked before the first is created: all are created, in order, or none."""
    settings, store, _ = ctx.configured
    checked, size = [], 0
    for index, item in enumerate(request.tasks):
        try:
            valid = m.revalidate(item)  # a nested model is not validated again with its request
            assert isinstance(valid, m.Submit)
            machine, item_size = _checked(ctx, valid)
        except ValueError as exc:
            raise ValueError(numbered(index, exc)) from None
        checked.append((valid, machine))
        size += item_size
    check_batch_size(size, settings.runtime)
    batch = i.SubmitBatch(tuple(_input(item, machine) for item, machine in checked))
    with store.group():  # every key and the queue's room checked before the first is created (Admission)
        made = _created(ctx, stepped(ctx, batch), [item for item, _ in checked], sender)
    return [{"task_id": s.task_id, "machine": s.machine, "priority": s.priority, "lifecycle_state": s.lifecycle_state,
             "existing": s.existing} for s in made]


def _input(request: m.Submit, machine: str) -> i.Submit:
    return i.Submit(request.text, machine, request.priority, dict(request.metadata), request.source, request.key,
                    tier=request.tier)


def _checked(ctx: Context, request: m.Submit) -> tuple[str, int]:
    assert ctx.settings is not None
    check_tier(request.tier, ctx.settings.llm)
    return check_task(request.text, request.metadata, request.machine, ctx.settings.runtime)


def _created(ctx: Context, commands: list[Command], requests: list[m.Submit],
             sender: ActorAddress) -> list[Submitted]:
    """Each task's commands carried out after its follower (if any) subscribed: it sees them all."""
    made: list[Submitted] = []
    for command in commands:
        if not isinstance(command, Submitted):
            carry_out(ctx, [command])
            continue
        request = requests[len(made)]
        made.append(command)
        if request.follow:
            ctx.subscribers.append((sender, command.task_id))
        ctx.log.info("submitted_again" if command.existing else "submitted", task_id=command.task_id,
                     machine=command.machine, priority=request.priority)
    return made


def get(ctx: Context, request: m.Get) -> Any:
    return task_view(ctx, request.task_id)


def list_tasks(ctx: Context, request: m.ListTasks) -> Any:
    _, store, _ = ctx.configured
    found = (request.text, request.metadata)  # pegasus.store.search
    tasks = store.list_tasks(request.state, request.limit, request.offset, request.before, *found)
    return {"tasks": _with_tree(ctx, tasks), "total": store.count_tasks(request.state, *found),
            "offset": request.offset, "limit": request.limit}


def _with_tree(ctx: Context, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of ``list``: each task with its parent and whether it waits for its sub-tasks (the
    dashboard nests sub-tasks and tells a parent waiting for them from a task waiting for a person)."""
    _, store, admission = ctx.configured
    parents = store.parents_of([task["task_id"] for task in tasks])
    for task in tasks:
        record = admission.records.get(task["task_id"])
        task["parent_id"] = parents.get(task["task_id"])
        task["waiting_for_children"] = bool(record is not None and waiting_steps(record))
    return tasks


def history(ctx: Context, request: m.History) -> Any:
    _, store, _ = ctx.configured
    if store.task_row(request.task_id, lenient=True) is None:
        raise TaskNotFoundError(request.task_id)
    return {**history_view(request.task_id, store.transitions(request.task_id, lenient=True),
                           store.audit(request.task_id)),
            "post_reflection": reflections.reflection_of(store, request.task_id)}


def suspend(ctx: Context, request: m.Suspend, sender: ActorAddress) -> Any:
    admit(ctx, i.Suspend(request.task_id, request.reason))
    ctx.pending_suspend.setdefault(request.task_id, []).append((sender, request.request_id))
    return DEFERRED


def resume(ctx: Context, request: m.Resume) -> Any:
    settings, _, _ = ctx.configured
    if request.message is not None and len(request.message.encode()) > settings.runtime.max_input_bytes:
        raise ValueError(f"resume message is over {settings.runtime.max_input_bytes} bytes")
    admit(ctx, i.Resume(request.task_id, request.message))
    return task_view(ctx, request.task_id)


def cancel(ctx: Context, request: m.Cancel) -> Any:
    admit(ctx, i.Cancel(request.task_id, request.reason))
    answer_suspends(ctx, request.task_id)
    return task_view(ctx, request.task_id)


def approve(ctx: Context, request: m.Approve) -> Any:
    admit(ctx, i.Approve(request.task_id))
    return task_view(ctx, request.task_id)


def retry(ctx: Context, request: m.Retry) -> Any:
    admit(ctx, i.Retry(request.task_id))
    return task_view(ctx, request.task_id)


def send_message(ctx: Context, request: m.SendMessage) -> Any:
    """Committed before the reply: a message the client was told is accepted survives a SIGKILL of every process."""
    settings, store, _ = ctx.configured
    limit = settings.runtime.max_input_bytes
    if not request.text.strip():
        raise ValueError("the message is empty")
    if len(request.text.encode()) > limit:
        raise ValueError(f"the message is over {limit} bytes")
    with store.group():  # the message and what it changes: one commit, before the reply
        commands = stepped(ctx, i.Message(request.task_id, request.text))
    carry_out(ctx, commands)
    accepted = next(c for c in commands if isinstance(c, MessageAccepted))
    return {**task_view(ctx, request.task_id), "message": {"number": accepted.number, "delivery": accepted.delivery}}


def subscribe(ctx: Context, request: m.Subscribe, sender: ActorAddress) -> Any:
    _, _, admission = ctx.configured
    if request.task_id is not None:
        admission.get(request.task_id)  # unknown task: a clear error
    ctx.subscribers.append((sender, request.task_id))
    return {"subscribed": request.task_id or "*"}


def unsubscribe(ctx: Context, request: m.Unsubscribe, sender: ActorAddress) -> Any:
    # Only the subscription asked for: the same client may follow other tasks meanwhile.
    if (sender, request.task_id) not in ctx.subscribers:
        return {"removed": 0}
    ctx.subscribers.remove((sender, request.task_id))
    return {"removed": 1}


REQUESTS: Rows = {m.Get: get, m.ListTasks: list_tasks, m.History: history, m.Resume: resume, m.Cancel: cancel,
            m.Approve: approve, m.Retry: retry, m.SendMessage: send_message}
FROM_SENDER: Rows = {m.Submit: submit, m.SubmitMany: submit_many, m.Suspend: suspend, m.Subscribe: subscribe,
               m.Unsubscribe: unsubscribe}
