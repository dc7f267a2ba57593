"""Messages to a task: what ``pegasus message ID TEXT`` does, by lifecycle state (docs/messages.md).

Not started: it joins the context; running: it waits in the inbox and the run takes it at its next
transition; suspended: it resumes the task; finished: refused.  Each is stored and numbered before
anything else, and ``TaskContext.messages_taken`` says which a checkpoint holds, so a restarted run
gets the others, none twice.  Composed into ``Admission`` as ``inbox``.
"""

from __future__ import annotations

from typing import Any, Protocol

from pegasus.admission.commands import Command, MessageRun
from pegasus.admission.ports import StorePort
from pegasus.admission.records import TaskRecord
from pegasus.config import Settings
from pegasus.errors import MessageLimitReached
from pegasus.store.checkpoint import encode_full
from pegasus.task import EventType, InvalidStateTransition
from pegasus.task.names import CognitiveState, LifecycleState, MachineName

NOT_STARTED = frozenset({LifecycleState.DRAFT, LifecycleState.APPROVED, LifecycleState.QUEUED})


def taken_through(record: TaskRecord) -> int:
    """The number of the last message the task has (its context, or the resume it waits to apply)."""
    pending = record.pending_resume[1].get("through", 0) if record.pending_resume else 0
    return max(record.snapshot.context.messages_taken, int(pending))


def resume_payload(entries: list[tuple[int, str]]) -> dict[str, Any]:
    return {"messages": [text for _, text in entries], "through": max(number for number, _ in entries)}


class _Admission(Protocol):
    """What the inbox uses of Admission (which builds it)."""

    store: StorePort
    settings: Settings

    def get(self, task_id: str) -> TaskRecord: ...
    def _lifecycle(self, record: TaskRecord, event_type: EventType, **payload: Any) -> list[Command]: ...
    def _enqueue(self, record: TaskRecord) -> None: ...
    def _fill(self) -> list[Command]: ...


class Inbox:
    """``message`` and the inbox of running tasks; see the module docstring."""

    def __init__(self, admission: _Admission) -> None:
        self.admission = admission

    def message(self, task_id: str, text: str) -> tuple[dict[str, Any], list[Command]]:
        """Add ``text`` to the task's conversation: its number and when it reaches the task, and the effects."""
        record = self.admission.get(task_id)
        state = record.state
        suspended = state == LifecycleState.BLOCKED and record.snapshot.state == CognitiveState.SUSPENDED
        if state not in NOT_STARTED and state not in (LifecycleState.RUNNING, LifecycleState.BLOCKED):
            raise InvalidStateTransition(
                MachineName.LIFECYCLE, state, EventType.MESSAGE_RECEIVED,
                f"task {task_id} has finished its work ({state}); a message reaches a task that is "
                "waiting to start, running or suspended")
        self._check_caps(task_id, text)
        entry = (self.admission.store.add_message(task_id, text), text)
        delivery, effects = self._deliver(record, entry, suspended)
        return {"number": entry[0], "delivery": delivery}, effects

    def _check_caps(self, task_id: str, text: str) -> None:
        """MessageLimitReached when one more message would pass the task's count or bytes cap."""
        runtime = self.admission.settings.runtime
        count, size = self.admission.store.message_totals(task_id)
        if count >= runtime.task_messages_max:
            raise MessageLimitReached(task_id, "task_messages_max", runtime.task_messages_max,
                                      f"task {task_id} has {count} messages: [runtime] task_messages_max is "
                                      f"{runtime.task_messages_max} (submit a new task to go on)")
        size += len(text.encode())
        if size > runtime.task_messages_max_bytes:
            raise MessageLimitReached(task_id, "task_messages_max_bytes", runtime.task_messages_max_bytes,
                                      f"task {task_id}'s messages would be {size} bytes together: [runtime] "
                                      f"task_messages_max_bytes is {runtime.task_messages_max_bytes}")

    def _deliver(self, record: TaskRecord, entry: tuple[int, str], suspended: bool) -> tuple[str, list[Command]]:
        task_id, state = record.task_id, record.state
        if state == LifecycleState.RUNNING:
            record.inbox.append(entry)
            return "at its next transition", [MessageRun(task_id, record.run, tuple(record.inbox))]
        if suspended:
            return "resumed with it", self._resume_with(record, [entry])
        if state == LifecycleState.BLOCKED:  # a parent waiting for its sub-tasks (pegasus.admission.tree)
            self._fold(record, [entry])
            return "when its sub-tasks have ended", []
        if record.pending_resume is not None:  # queued by a resume: it re-thinks with every message
            _, payload = record.pending_resume
            before = [(0, str(t)) for t in payload.get("messages") or [payload.get("text")] if t]
            record.pending_resume = (EventType.MESSAGE_RECEIVED.value, resume_payload([*before, entry]))
            self.admission.store.update_task(task_id, pending_resume=record.pending_resume)
            return "when it resumes", []
        self._fold(record, [entry])
        return "when it starts", []

    def _fold(self, record: TaskRecord, entries: list[tuple[int, str]]) -> None:
        """Put messages straight into the task's context (a task no run holds), checkpointed."""
        context = record.snapshot.context.model_copy(deep=True)
        context.messages += [{"role": "user", "content": text} for _, text in entries]
        context.messages_taken = max(number for number, _ in entries)
        record.snapshot = record.snapshot.model_copy(update={"context": context})
        self.admission.store.add_checkpoint(record.task_id, record.run, "full", record.snapshot.state,
                                  encode_full(record.snapshot))

    def _resume_with(self, record: TaskRecord, entries: list[tuple[int, str]]) -> list[Command]:
        """Resume a suspended (blocked) task with messages: it re-thinks with them once it has a slot."""
        record.pending_resume = (EventType.MESSAGE_RECEIVED.value, resume_payload(entries))
        effects = self.admission._lifecycle(record, EventType.TASK_UNBLOCKED, reason="a message arrived")
        self.admission._enqueue(record)
        return effects + self.admission._fill()

    def _unread(self, record: TaskRecord) -> list[tuple[int, str]]:
        """The inbox less what the task's snapshot already holds."""
        through = taken_through(record)
        record.inbox = [entry for entry in record.inbox if entry[0] > through]
        return record.inbox

    def _after_stop(self, record: TaskRecord, state: str) -> list[Command]:
        """A run stopped with messages it did not take.  Suspended for more information: resumed with
        them.  Suspended by request: it stays so (the request is answered), the messages in its
        context for when it is resumed.  Finished: too late for them (the store keeps them)."""
        unread = self._unread(record)
        record.inbox = []
        if not unread or state != CognitiveState.SUSPENDED or record.state != LifecycleState.BLOCKED:
            return []
        history = record.cognitive_history
        if not history or history[-1]["event"] != EventType.TASK_SUSPENDED:  # it asked for information
            return self._resume_with(record, unread)
        self._fold(record, unread)
        return []

    def _restore_inbox(self, record: TaskRecord) -> None:
        """A running task restored from the store: the messages its checkpoint does not hold yet."""
        record.inbox = self.admission.store.messages_after(record.task_id, taken_through(record),  # bad rows: quarantined
                                                 self.admission.settings.runtime.max_input_bytes)
