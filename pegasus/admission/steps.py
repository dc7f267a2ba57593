"""Each input of ``Admission.step`` and the Admission call that handles it: one row per input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pegasus.admission import inputs as i
from pegasus.admission.commands import Command, MessageAccepted, Submitted
from pegasus.admission.messages import Inbox
from pegasus.admission.records import TaskRecord
from pegasus.idempotency import Claim, IdempotencyConflict, check_batch
from pegasus.run.commands import ChildStep
from pegasus.submission import numbered
from pegasus.task import TaskSnapshot


class _Admission(Protocol):
    """What the rows call (Admission; it imports this module)."""

    inbox: Inbox

    def submit(self, text: str, machine: str, priority: int, metadata: dict[str, Any], source: str,
               key: str | None = None, scope: str = ..., *,
               tier: str | None = None) -> tuple[TaskRecord, list[Command]]: ...
    def claim(self, key: str | None, text: str, machine: str, priority: int, metadata: dict[str, Any],
              scope: str = ..., tier: str | None = None) -> Claim | None: ...
    def task_for(self, claim: Claim | None) -> str | None: ...
    def check_room(self, tasks: int) -> None: ...
    def approve(self, task_id: str) -> list[Command]: ...
    def cancel(self, task_id: str, reason: str) -> list[Command]: ...
    def suspend(self, task_id: str, reason: str) -> list[Command]: ...
    def resume(self, task_id: str, message: str | None) -> list[Command]: ...
    def retry(self, task_id: str) -> list[Command]: ...
    def restore(self) -> list[Command]: ...
    def wake(self, task_id: str) -> list[Command]: ...
    def on_transition(self, task_id: str, run: int, from_state: str, to_state: str, event: str, timestamp: str,
                      stage: dict[str, Any] | None) -> list[Command]: ...
    def on_stopped(self, task_id: str, run: int, state: str, snapshot: TaskSnapshot, exit_reason: str | None,
                   children: tuple[ChildStep, ...] = ()) -> list[Command]: ...
    def on_run_lost(self, task_id: str, run: int, why: str) -> list[Command]: ...
    def on_gate(self, task_id: str, token: int, ok: bool, detail: dict[str, Any]) -> list[Command]: ...


def submit(admission: _Admission, event: i.Submit) -> list[Command]:
    record, commands = admission.submit(event.text, event.machine, event.priority, dict(event.metadata),
                                        event.source, event.key, event.scope, tier=event.tier)
    return [Submitted(record.task_id, record.machine, record.priority, record.state, not commands), *commands]


def submit_batch(admission: _Admission, event: i.SubmitBatch) -> list[Command]:
    """All or none: every key and the queue's room are checked before the first task is created."""
    claims = [admission.claim(t.key, t.text, t.machine, t.priority, dict(t.metadata), t.scope, t.tier)
              for t in event.tasks]
    check_batch(claims)
    for index, claim in enumerate(claims):  # a key used before with other content: none is created
        try:
            admission.task_for(claim)
        except IdempotencyConflict as exc:
            raise IdempotencyConflict(numbered(index, exc), exc.key, exc.task_id) from None
    admission.check_room(len(event.tasks))
    return [command for task in event.tasks for command in submit(admission, task)]


def message(admission: _Admission, event: i.Message) -> list[Command]:
    sent, commands = admission.inbox.message(event.task_id, event.text)
    return [MessageAccepted(sent["number"], sent["delivery"]), *commands]


STEPS: dict[type, Callable[[Any, Any], list[Command]]] = {
    i.Submit: submit,
    i.SubmitBatch: submit_batch,
    i.Message: message,
    i.Approve: lambda a, e: a.approve(e.task_id),
    i.Cancel: lambda a, e: a.cancel(e.task_id, e.reason),
    i.Suspend: lambda a, e: a.suspend(e.task_id, e.reason),
    i.Resume: lambda a, e: a.resume(e.task_id, e.message),
    i.Retry: lambda a, e: a.retry(e.task_id),
    i.Restore: lambda a, e: a.restore(),
    i.Wake: lambda a, e: a.wake(e.task_id),
    i.Transitioned: lambda a, e: a.on_transition(e.task_id, e.run, e.from_state, e.to_state, e.event, e.timestamp,
                                                 e.stage),
    i.Stopped: lambda a, e: a.on_stopped(e.task_id, e.run, e.state, e.snapshot, e.exit_reason, e.children),
    i.RunLost: lambda a, e: a.on_run_lost(e.task_id, e.run, e.why, e.outcome),
    i.GateAnswered: lambda a, e: a.on_gate(e.task_id, e.token, e.ok, e.detail),
}
