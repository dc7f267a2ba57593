"""TaskFSM: one task's state machine (seed 000's TaskFSM, for any machine).

The FSM does no I/O.  It validates a transition, updates the state and the
context, and records the transition in its history; the runtime does the work
(LLM calls, tools) after the transition.  The clock and the id factory are
parameters so that tests get identical histories.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pegasus.task import machines as _machines
from pegasus.task.engine import InPlace, Machine
from pegasus.task.errors import InvalidStateTransition
from pegasus.task.events import EXTERNAL_INPUT, Event, EventType, new_id, utc_now
from pegasus.task.models import StateTransition, TaskContext, TaskSnapshot, copied_fields, deep_copy
from pegasus.task.names import MachineName

Clock = Callable[[], datetime]
IdFactory = Callable[[], str]

DEFAULT_PRIORITY = 5

_SOURCE_BY_EVENT = {
    EventType.MESSAGE_RECEIVED: "message",
    EventType.WEBHOOK_TRIGGERED: "webhook",
    EventType.SCHEDULE_FIRED: "schedule",
}


class TaskFSM:
    """A task: its machine, state, context, history, priority and metadata."""

    def __init__(
        self,
        machine: Machine | str,
        *,
        task_id: str,
        context: TaskContext,
        priority: int = DEFAULT_PRIORITY,
        metadata: dict[str, Any] | None = None,
        state: str | None = None,
        history: list[StateTransition] | None = None,
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
        clock: Clock = utc_now,
        id_factory: IdFactory = new_id,
    ) -> None:
        self.machine = machine if isinstance(machine, Machine) else _machines.get(machine)
        self.task_id = task_id
        self.priority = priority
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._context = context
        self._state = state or self.machine.initial
        if self._state not in self.machine.states:
            raise InvalidStateTransition(self.machine.name, self._state, EventType.TASK_CREATED, "unknown state")
        self._history: list[StateTransition] = list(history or [])
        self._clock = clock
        self._id_factory = id_factory
        self.created_at = created_at or clock()
        self.updated_at = updated_at or self.created_at

    # -- construction ----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        machine: str = MachineName.CLASSIC,
        input_text: str = "",
        *,
        source: str = "cli",
        priority: int = DEFAULT_PRIORITY,
        task_id: str | None = None,
        clock: Clock = utc_now,
        id_factory: IdFactory = new_id,
        **metadata: Any,
    ) -> TaskFSM:
        """A new task in its machine's initial state."""
        context = TaskContext(input_text=input_text, input_metadata=dict(metadata), source=source)
        return cls(machine, task_id=task_id or id_factory(), context=context, priority=priority,
                   metadata=metadata, clock=clock, id_factory=id_factory)

    @classmethod
    def from_event(
        cls,
        event: Event,
        machine: str = MachineName.CLASSIC,
        *,
        priority: int | None = None,
        clock: Clock = utc_now,
        id_factory: IdFactory = new_id,
    ) -> TaskFSM:
        """A new task from an external input event (MESSAGE_RECEIVED, WEBHOOK_TRIGGERED, SCHEDULE_FIRED)."""
        if event.type not in EXTERNAL_INPUT:
            raise InvalidStateTransition(machine, "-", event.type, "only external input events create tasks")
        payload = event.payload
        text = payload.get("text", payload.get("input_text", ""))
        metadata = dict(payload.get("metadata") or {})
        return cls.create(
            machine,
            str(text),
            source=str(payload.get("source") or _SOURCE_BY_EVENT[event.type]),
            priority=int(payload.get("priority", DEFAULT_PRIORITY)) if priority is None else priority,
            task_id=event.task_id,
            clock=clock,
            id_factory=id_factory,
            **metadata,
        )

    @classmethod
    def restore(cls, snapshot: TaskSnapshot, *, clock: Clock = utc_now, id_factory: IdFactory = new_id,
                share: bool = False) -> TaskFSM:
        """Rebuild a task from a snapshot (a checkpoint).

        ``share``: take the snapshot's context as it is, not a copy.  Safe because the FSM never
        changes a context in place (``transition`` changes a copy, ``replace_context`` makes a new
        one): only a caller that writes into ``context`` itself must leave ``share`` off.
        """
        context = snapshot.context if share else deep_copy(snapshot.context)
        return cls(snapshot.machine, task_id=snapshot.task_id, context=context,
                   priority=snapshot.priority, metadata=dict(snapshot.metadata), state=snapshot.state,
                   history=list(snapshot.history), created_at=snapshot.created_at,
                   updated_at=snapshot.updated_at, clock=clock, id_factory=id_factory)

    def snapshot(self, share: bool = False) -> TaskSnapshot:
        """The task as a value; ``share``: holding this FSM's context, not a copy (see ``restore``)."""
        context = self._context if share else deep_copy(self._context)
        return TaskSnapshot(machine=self.machine.name, task_id=self.task_id, state=self._state,
                            context=context, history=list(self._history),
                            priority=self.priority, metadata=dict(self.metadata),
                            created_at=self.created_at, updated_at=self.updated_at)

    # -- queries ---------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def context(self) -> TaskContext:
        return self._context

    @property
    def history(self) -> list[StateTransition]:
        """A copy of the transition history, oldest first."""
        return list(self._history)

    @property
    def is_terminal(self) -> bool:
        return self._state in self.machine.terminal

    @property
    def is_active(self) -> bool:
        return self._state in self.machine.active

    def can_transition(self, event_type: EventType | str) -> bool:
        """Whether the table has a row for ``event_type`` in the current state.

        Dynamic rows and entry gates may still refuse a concrete event (a guard
        reads its payload); ``transition`` is the final word.
        """
        return self.machine.row_for(self._state, EventType(event_type)) is not None

    # -- mutations -----------------------------------------------------------------------
    def replace_context(self, **fields: Any) -> None:
        """A new context with ``fields`` changed, the rest shared with the old one (which a shared
        snapshot may hold: it is left as it was)."""
        self._context = self._context.model_copy(update=fields)

    def transition(self, event: Event | EventType | str, **payload: Any) -> str:
        """Apply ``event``; return the new state.

        Raises InvalidStateTransition (state, context, metadata and history
        untouched) when the event is not allowed.  A plain event type (with the
        payload as keywords) is accepted for convenience; an id is then made by
        the id factory and the time taken from the clock.
        """
        if not isinstance(event, Event):
            event = Event(type=EventType(event), task_id=self.task_id, payload=payload,
                          id=self._id_factory(), timestamp=self._clock())
        if event.task_id is not None and event.task_id != self.task_id:
            raise InvalidStateTransition(self.machine.name, self._state, event.type,
                                         f"event is for task {event.task_id}, not {self.task_id}")
        machine, source = self.machine, self._state
        if machine.row_for(source, event.type) is None:
            machine.resolve(source, self._context, event)  # raises with the right message
        reducer = machine.reducers.get(event.type)
        # A reducer changes a copy (a refused event leaves the context untouched); none: nothing to copy.  One
        # that says which fields it changes in place gets those copied (a deep copy was ~10% of a task actor's CPU).
        if reducer is None:
            context = self._context
        elif isinstance(reducer, InPlace):
            context = copied_fields(self._context, reducer.fields)
        else:
            context = deep_copy(self._context)
        if reducer is not None:
            try:
                reducer(context, event)
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                raise InvalidStateTransition(machine.name, source, event.type, f"bad payload: {exc}") from exc
        target = machine.resolve(source, context, event)
        if target == source and machine.same_state_is_noop:
            return source  # seed 002 T19/T20: same-state requests write nothing
        metadata_updates: dict[str, Any] = {}
        gate = machine.entry_gates.get(target)
        if gate is not None:
            metadata_updates = gate.check(source, event, self.metadata, len(self._history) + 1)
        if machine.suspended is not None:
            if target == machine.suspended and source != machine.suspended:
                context = context.model_copy(update={"suspended_state": source})
            elif source == machine.suspended and target != machine.suspended:
                context = context.model_copy(update={"suspended_state": None, "suspend_reason": None})
        # Commit: nothing above has touched self.
        now = self._clock()
        self._context = context
        self.metadata.update(metadata_updates)
        self._history.append(StateTransition(from_state=source, to_state=target,
                                             trigger_event_type=str(event.type),
                                             trigger_event_id=event.id, timestamp=now))
        self._state = target
        self.updated_at = now
        return target

    def __repr__(self) -> str:
        return f"TaskFSM({self.machine.name}, {self.task_id}, state={self._state!r})"
