"""Admission: the supervisor's view of every task, as seed 002's lifecycle.

draft -> approved -> queued (priority, FIFO within one) -> running (at most ``max_active_tasks``)
-> verifying (gates) -> done; failed, canceled and blocked (suspended: holds no slot) as in the
seed.  ``step(input) -> list[Command]`` never raises (a refusal is a ``Refused`` command); writes
go through the store port it is given; clock and ids are parameters.  Composed: ``inbox``, ``tree``.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pegasus.admission.commands import Command, Refused, RunGate, StartRun, StopRun, SuspendRun, TransitionNotice, WakeAfter
from pegasus.admission import inputs as i
from pegasus.admission.steps import STEPS
from pegasus.admission.messages import Inbox
from pegasus.admission.ports import NullStore, StorePort
from pegasus.admission.records import (
    ACTORS, TaskRecord, new_fsm, record_from_row, restorable, run_ended, stage_detail,
)
from pegasus.admission.tree import Tree
from pegasus.config import Settings
from pegasus.idempotency import SUBMIT, Claim, submit_claim
from pegasus.store.quarantine import reason
from pegasus.run.commands import ChildStep
from pegasus.store.checkpoint import encode_full, rebuild
from pegasus.store.task_ids import TaskIds
from pegasus.store.tree import Link
from pegasus.task import (
    Event, EventType, InvalidStateTransition, RetryNotAllowedError, TaskAlreadyInStateError, TaskNotFoundError,
    TaskSnapshot,
)
from pegasus.task.errors import QueueFull
from pegasus.task.names import CognitiveState, LifecycleState, MachineName

_ENDS = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})  # a sub-task's ends
MAX_RESTARTS = 3  # restarts of one run after its task actor died, before the task fails
EVICTED = frozenset({LifecycleState.DONE, LifecycleState.CANCELED})  # lifecycle states whose records leave memory


class Admission:
    """All tasks of one supervisor: records, the priority queue and the running set."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 id_factory: Callable[[], str] | None = None, store: StorePort | None = None) -> None:
        self.settings = settings
        self.store: StorePort = store if store is not None else NullStore()
        self.clock = clock
        self.id_factory = id_factory or TaskIds()  # time-ordered: a commit's rows share index pages
        self.records: dict[str, TaskRecord] = {}
        self.quarantined: dict[str, str] = {}  # task id -> why: rows restore set aside (pegasus stats)
        self.running: set[str] = set()
        self._queue: list[tuple[int, int, str]] = []
        self._queued: set[str] = set()
        self._delayed: dict[str, float] = {}
        self._seq = itertools.count(self.store.seq_high_water() + 1)
        self.tree = Tree(self)  # sub-tasks (pegasus.admission.tree)
        self.inbox = Inbox(self)  # messages to tasks (pegasus.admission.messages)

    def step(self, event: i.Input) -> list[Command]:
        """Apply one input; the commands to carry out, in order.  Never raises: an input that fails
        (a bad request, the store's failure) changes nothing it has not written and is ``Refused``."""
        try:
            return STEPS[type(event)](self, event)
        except Exception as exc:  # noqa: BLE001 - the carrier answers or reports it
            return [Refused(exc)]

    # -- queries -------------------------------------------------------------------------------
    def get(self, task_id: str) -> TaskRecord:
        """The task's record; one not in memory (ended, or failed before this start) is read from the store."""
        record = self.records.get(task_id)
        if record is not None:
            return record
        row = self.store.task_row(task_id)
        if row is None:
            raise TaskNotFoundError(task_id)
        return record_from_row(row, self.store.transitions(row["task_id"]))

    def queue_length(self) -> int:
        return len(self._queued)

    def counts(self) -> dict[str, int]:
        """Tasks per lifecycle state (the store's count when it keeps every task)."""
        if self.store.durable:
            return self.store.counts()
        out: dict[str, int] = {}
        for record in self.records.values():
            out[record.state] = out.get(record.state, 0) + 1
        return out

    # -- requests --------------------------------------------------------------------------------
    def check_room(self, tasks: int) -> None:
        """Refuse ``tasks`` new tasks when they could overflow the queue (``max_pending_tasks``)."""
        waiting = len(self._queued) + len(self._delayed)
        if waiting + tasks > self.settings.runtime.max_pending_tasks:
            more = "" if tasks == 1 else f" ({tasks} submitted at once)"
            raise QueueFull(MachineName.LIFECYCLE, LifecycleState.DRAFT, EventType.TASK_QUEUED,
                                         f"{waiting} tasks already wait{more}; the limit is "
                                         f"{self.settings.runtime.max_pending_tasks}")

    def claim(self, key: str | None, text: str, machine: str, priority: int,
              metadata: dict[str, Any], scope: str = SUBMIT, tier: str | None = None) -> Claim | None:
        """The idempotency claim of a submit with ``key`` in ``scope`` (None without one)."""
        return None if key is None else submit_claim(key, text, machine, priority, metadata, scope, tier)

    def task_for(self, claim: Claim | None) -> str | None:
        """The task an earlier request with this claim's key created (None: a new key);
        IdempotencyConflict when that request asked for something else."""
        if claim is None:
            return None
        known = self.store.claimed(claim.scope, claim.key)
        if known is None:
            return None
        if known["fingerprint"] != claim.fingerprint:
            raise claim.conflict(known["task_id"])
        return str(known["task_id"])

    def submit(self, text: str, machine: str, priority: int, metadata: dict[str, Any],
               source: str, key: str | None = None, scope: str = SUBMIT, *, claim: Claim | None = None,
               link: Link | None = None, tier: str | None = None) -> tuple[TaskRecord, list[Command]]:
        """A new task, or with a ``key`` already used (in ``scope``), the task that key created and no
        effects (a retried request changes nothing).  ``claim`` and ``link``: a sub-task's
        (its parent's step key, and its place in the tree; the link's child_id is filled in)."""
        claim = claim if claim is not None else self.claim(key, text, machine, priority, metadata, scope, tier)
        known = self.task_for(claim)
        if known is not None:
            return self.get(known), []
        self.check_room(1)
        task_id = self.id_factory()
        cognitive = new_fsm(machine, task_id, text, source, priority, metadata, tier)
        lifecycle = new_fsm(MachineName.LIFECYCLE, task_id, text, source, priority, metadata)
        record = TaskRecord(task_id, machine, priority, next(self._seq), lifecycle, cognitive.snapshot())
        self.store.create_task({"task_id": task_id, "machine": machine, "cognitive_state": cognitive.state,
                                "priority": priority, "seq": record.seq, "input": text, "source": source,
                                "metadata": metadata, "tier": tier,
                                "link": None if link is None else replace(link, child_id=task_id)},
                               encode_full(record.snapshot), claim)
        self.records[task_id] = record
        effects: list[Command] = [self._notify(record, "-", LifecycleState.DRAFT, "TASK_CREATED")]
        if self.settings.runtime.approval_policy == "auto":
            effects += self._approve(record, "auto-approved")
        return record, effects

    def approve(self, task_id: str) -> list[Command]:
        record = self.get(task_id)
        if record.state != LifecycleState.DRAFT:
            raise TaskAlreadyInStateError(task_id, record.state) if record.state == LifecycleState.APPROVED else \
                InvalidStateTransition(MachineName.LIFECYCLE, record.state, EventType.TASK_APPROVED, "only a draft is approved")
        return self._approve(record, "approved by request", actor="user")

    def cancel(self, task_id: str, reason: str) -> list[Command]:
        record = self.get(task_id)
        was = record.state
        effects = self._lifecycle(record, EventType.TASK_CANCELED, reason=reason)
        self._queued.discard(task_id)
        self._delayed.pop(task_id, None)
        if was in (LifecycleState.RUNNING, LifecycleState.VERIFYING):
            record.gate_token += 1  # a gate still running is stale now
            if task_id in self.running:
                self.running.discard(task_id)
                effects += [run_ended(record, LifecycleState.CANCELED), StopRun(task_id, record.run)]
            effects += self._fill()
        return effects + self.tree.cancel_descendants(task_id, reason)

    def suspend(self, task_id: str, reason: str) -> list[Command]:
        record = self.get(task_id)
        if record.state != LifecycleState.RUNNING:
            raise InvalidStateTransition(MachineName.LIFECYCLE, record.state, EventType.TASK_SUSPENDED,
                                         self.tree.refuse_suspend(record) or "only a running task can be suspended")
        return [SuspendRun(task_id, record.run, reason)]

    def resume(self, task_id: str, message: str | None) -> list[Command]:
        record = self.get(task_id)
        if record.state != LifecycleState.BLOCKED or record.snapshot.state != CognitiveState.SUSPENDED:
            raise InvalidStateTransition(MachineName.LIFECYCLE, record.state, EventType.TASK_RESUMED,
                                         "only a suspended task can be resumed")
        if message:
            record.pending_resume = (EventType.MESSAGE_RECEIVED.value, {"text": message})
        else:
            record.pending_resume = (EventType.TASK_RESUMED.value, {})
        effects = self._lifecycle(record, EventType.TASK_UNBLOCKED, reason="resumed")
        self._enqueue(record)
        return effects + self._fill()

    def retry(self, task_id: str) -> list[Command]:
        record = self.get(task_id)
        if record.state != LifecycleState.FAILED:
            raise InvalidStateTransition(MachineName.LIFECYCLE, record.state, EventType.TASK_RETRIED, "only a failed task is retried")
        limit = self.settings.retry.max_attempts
        if record.attempts >= limit:
            raise RetryNotAllowedError(task_id, f"{record.attempts} of {limit} attempts used")
        backoff = min(self.settings.retry.backoff_s * 2 ** (record.attempts - 1), self.settings.retry.backoff_max_s)
        record.attempts += 1
        record.exit_reason = record.error = None
        record.gate_failures = 0
        self._fresh_run(record)
        effects = self._lifecycle(record, EventType.TASK_RETRIED, reason=f"attempt {record.attempts} of {limit}")
        if backoff > 0:
            self._delayed[task_id] = self.clock() + backoff
            return effects + [WakeAfter(backoff, task_id)]
        self._enqueue(record)
        return effects + self._fill()

    def message(self, task_id: str, text: str) -> tuple[dict[str, Any], list[Command]]:
        """Add ``text`` to the task's conversation (pegasus.admission.messages)."""
        return self.inbox.message(task_id, text)

    def wake(self, task_id: str) -> list[Command]:
        """A backoff has passed (maybe): queue what is due."""
        now = self.clock()
        for due_id, due in list(self._delayed.items()):
            if due <= now:
                del self._delayed[due_id]
                self._enqueue(self.records[due_id])
        return self._fill()

    # -- reports from task actors and gates -----------------------------------------------------
    def on_transition(self, task_id: str, run: int, from_state: str, to_state: str, event: str,
                      timestamp: str, stage: dict[str, Any] | None) -> list[Command]:
        record = self.records.get(task_id)
        if record is None or run != record.run:
            return []
        entry = {"run": run, "from_state": from_state, "to_state": to_state, "event": event, "timestamp": timestamp}
        record.cognitive_history.append(entry)
        if stage is not None:
            record.stages.append({"run": run, **stage})
        record.snapshot = record.snapshot.model_copy(update={"state": to_state})
        return [TransitionNotice(task_id, record.machine, from_state, to_state, event, timestamp,
                                 stage_detail(stage) if stage else {})]

    def on_stopped(self, task_id: str, run: int, state: str, snapshot: TaskSnapshot,
                   exit_reason: str | None, children: tuple[ChildStep, ...] = ()) -> list[Command]:
        record = self.records.get(task_id)
        if record is None or run != record.run or record.state != LifecycleState.RUNNING:
            return []  # a run that was canceled or replaced: its end changes nothing
        record.snapshot = snapshot
        self.running.discard(task_id)
        failed = None if state in (CognitiveState.COMPLETED, CognitiveState.SUSPENDED) or children else \
            exit_reason or state
        effects: list[Command] = [run_ended(record, "waiting_for_sub_tasks" if children else state, exit_reason, failed)]
        if children:  # it waits for sub-tasks, holding nothing (pegasus.admission.tree)
            effects += self.tree.wait(record, children)
        elif state == CognitiveState.SUSPENDED:
            effects += self._lifecycle(record, EventType.TASK_BLOCKED,
                                       reason=snapshot.context.suspend_reason or "suspended")
        elif state == CognitiveState.COMPLETED:
            effects += self._lifecycle(record, EventType.EXECUTION_COMPLETED, reason="execution completed")
            record.gate_index = 0
            effects += self._next_gate(record)
        else:
            effects += self._fail(record, exit_reason or "exception", snapshot.context.error or "failed")
        return effects + self.inbox._after_stop(record, state) + self._fill()

    def on_run_lost(self, task_id: str, run: int, why: str, outcome: str = "died") -> list[Command]:
        """The task actor died without reporting: restart the run from its last checkpoint.

        The lifecycle stays ``running`` (T19); the new run number makes anything
        the dead actor still had in flight stale.  After MAX_RESTARTS the task fails.
        """
        record = self.records.get(task_id)
        if record is None or run != record.run or record.state != LifecycleState.RUNNING:
            return []
        record.restarts += 1
        ended: list[Command] = [run_ended(record, outcome, failed=why)]
        if record.restarts > MAX_RESTARTS:
            self.running.discard(task_id)
            gave_up = f"{why}; gave up after {MAX_RESTARTS} restarts"
            return ended + self._fail(record, "exception", gave_up) + self._fill()
        try:
            record.snapshot = self._rebuild(record)
        except Exception as exc:  # noqa: BLE001 - quarantined (pegasus.store.quarantine): this task fails alone
            self.running.discard(task_id)
            self.quarantined[task_id] = error = reason(exc)
            return ended + self._fail(record, "fatal_error", error) + self._fill()
        record.run += 1
        return ended + [self._start(record)]

    def _rebuild(self, record: TaskRecord) -> TaskSnapshot:  # raises for any row it (or _start) cannot follow
        rows, _ = self.store.checkpoints(record.task_id), self.store.journal(record.task_id)
        if not rows:  # no durable store (NullStore): the snapshot in memory is the truth
            return record.snapshot
        return rebuild(record.task_id, rows)

    # -- recovery ----------------------------------------------------------------------------------
    def restore(self) -> list[Command]:
        """Bring back every unfinished task from the store (on system start).

        draft stays draft; approved and queued are queued; running tasks resume from their last checkpoint;
        verifying runs its gates again; verified is done; blocked (suspended) stays blocked.  A task whose
        rows cannot be followed (any error) is quarantined (pegasus.store.quarantine): it fails alone, fatal_error.
        """
        effects: list[Command] = []
        restarts: list[TaskRecord] = []
        for record in restorable(self.store, self.quarantined):  # a row it cannot follow: quarantined
            self.records[record.task_id] = record
            try:
                record.snapshot = self._rebuild(record)
            except Exception as exc:  # noqa: BLE001 - quarantined (pegasus.store.quarantine): this task fails alone
                self.quarantined[record.task_id] = error = reason(exc)
                effects += self._fail_unrecoverable(record, error)
                continue
            if record.state == LifecycleState.APPROVED:
                effects += self._lifecycle(record, EventType.TASK_QUEUED, reason="restored")
                self._enqueue(record)
            elif record.state == LifecycleState.QUEUED:
                self._enqueue(record)
            elif record.state == LifecycleState.RUNNING:
                self.inbox._restore_inbox(record)
                restarts.append(record)
            elif record.state == LifecycleState.VERIFYING:
                record.gate_index = 0
                effects += self._next_gate(record)
            elif record.state == LifecycleState.VERIFIED:
                effects += self._lifecycle(record, EventType.TASK_DONE, reason="restored")
        for record in restarts:
            record.run += 1
            self.running.add(record.task_id)
            # The resume it started with, unless its checkpoint is past it already.
            pending = record.pending_resume if record.snapshot.state == CognitiveState.SUSPENDED else None
            effects.append(self._start(record, *(pending or (None, None))))
            record.pending_resume = None
        return effects + self.tree.restore() + self._fill()

    def _fail_unrecoverable(self, record: TaskRecord, error: str) -> list[Command]:
        """Fail a task whose checkpoints cannot be read, by legal lifecycle moves only.

        ``failed`` is entered from running (T8) or verifying (T12), so a task
        restored in another state walks there first; every step is audited.
        """
        walks: dict[str, list[EventType]] = {LifecycleState.DRAFT: [EventType.TASK_APPROVED, EventType.TASK_QUEUED, EventType.TASK_STARTED],
                LifecycleState.APPROVED: [EventType.TASK_QUEUED, EventType.TASK_STARTED], LifecycleState.QUEUED: [EventType.TASK_STARTED],
                LifecycleState.BLOCKED: [EventType.TASK_UNBLOCKED, EventType.TASK_STARTED]}
        effects: list[Command] = []
        for event_type in walks.get(record.state, []):
            effects += self._lifecycle(record, event_type, reason="restore: checkpoint unreadable")
        if record.state in (LifecycleState.RUNNING, LifecycleState.VERIFYING):
            effects += self._fail(record, "fatal_error", error)
        return effects

    def on_gate(self, task_id: str, token: int, ok: bool, detail: dict[str, Any]) -> list[Command]:
        record = self.records.get(task_id)
        if record is None or token != record.gate_token or record.state != LifecycleState.VERIFYING:
            return []
        record.gates.append({"run": record.run, "ok": ok, **detail})
        if ok:
            record.gate_index += 1
            return self._next_gate(record)
        if record.gate_failures < self.settings.verification.max_gate_retries:
            record.gate_failures += 1
            self._fresh_run(record, note=f"verification gate failed: {detail.get('error', '')}")
            effects = self._lifecycle(record, EventType.GATE_FAILED, reason=str(detail.get("error", "gate failed")))
            self._enqueue(record)
            return effects + self._fill()
        return self._fail(record, "gate_failed", str(detail.get("error", "verification gate failed")))

    # -- internals -------------------------------------------------------------------------------------
    def _approve(self, record: TaskRecord, reason: str, actor: str = "system") -> list[Command]:
        effects = self._lifecycle(record, EventType.TASK_APPROVED, actor=actor, reason=reason)
        effects += self._lifecycle(record, EventType.TASK_QUEUED, reason="waiting for a slot")
        self._enqueue(record)
        return effects + self._fill()

    def _enqueue(self, record: TaskRecord) -> None:
        if record.task_id not in self._queued:
            self._queued.add(record.task_id)
            heapq.heappush(self._queue, (record.priority, next(self._seq), record.task_id))

    def _fill(self) -> list[Command]:
        effects: list[Command] = []
        while self._queue and len(self.running) < self.settings.runtime.max_active_tasks:
            _, _, task_id = heapq.heappop(self._queue)
            if task_id not in self._queued:
                continue  # canceled while waiting
            self._queued.discard(task_id)
            record = self.records[task_id]
            record.run += 1
            effects += self._lifecycle(record, EventType.TASK_STARTED, reason="slot free")
            self.running.add(task_id)
            event, payload = record.pending_resume or (None, {})
            record.pending_resume = None
            effects.append(self._start(record, event, payload))
        return effects

    def _start(self, record: TaskRecord, event: str | None = None, payload: dict[str, Any] | None = None) -> StartRun:
        generation = f"{record.attempts}.{record.gate_failures}"
        journal = self.store.journal(record.task_id) if record.run > 1 else {}  # no run before the first: none
        return StartRun(record.task_id, record.run, record.snapshot, generation, event, payload or {},
                        journal, tuple(self.inbox._unread(record)))

    def _next_gate(self, record: TaskRecord) -> list[Command]:
        gates = self.settings.verification.gates
        if record.gate_index < len(gates):
            record.gate_token += 1
            return [RunGate(record.task_id, record.gate_token, gates[record.gate_index])]
        effects = self._lifecycle(record, EventType.TASK_VERIFIED, reason=f"{len(gates)} gate(s) passed")
        return effects + self._lifecycle(record, EventType.TASK_DONE, reason="verified")

    def _fail(self, record: TaskRecord, exit_reason: str, error: str) -> list[Command]:
        record.exit_reason, record.error = exit_reason, error
        return self._lifecycle(record, EventType.TASK_FAILED, exit_reason=exit_reason, reason=error)

    def _fresh_run(self, record: TaskRecord, note: str | None = None) -> None:
        """A new cognitive run of the same task (retry, or a failed gate sends it back)."""
        context = record.snapshot.context
        fresh = new_fsm(record.machine, record.task_id, context.input_text, context.source, record.priority,
                         context.input_metadata, context.tier)
        if note:
            fresh.context.messages.append({"role": "system", "content": note})
        record.snapshot = fresh.snapshot()
        self.store.add_checkpoint(record.task_id, record.run, "full", record.snapshot.state,
                                  encode_full(record.snapshot))

    def _lifecycle(self, record: TaskRecord, event_type: EventType, *, actor: str | None = None,
                   **payload: Any) -> list[Command]:
        """Apply a lifecycle event in memory, then write it (compare-and-set) with its audit row."""
        source = record.lifecycle.state
        # No uuid4 (60% of building the Event): a lifecycle event's id is never stored (a restored record has '')
        target = record.lifecycle.transition(Event(type=event_type, task_id=record.task_id, payload=payload, id=""))
        if target == source:
            return []
        context = record.snapshot.context
        self.store.lifecycle_transition(
            record.task_id, source, target, event_type.value, actor=actor or ACTORS.get(event_type, "system"),
            reason=str(payload.get("reason", "")), metadata={k: v for k, v in payload.items() if k != "reason"},
            run=record.run,
            updates={"cognitive_state": record.snapshot.state, "attempts": record.attempts, "runs": record.run,
                     "gate_failures": record.gate_failures, "exit_reason": record.exit_reason,
                     "error": record.error, "pending_resume": record.pending_resume,
                     "result": context.final_result if target == LifecycleState.DONE else None})
        notice = self._notify(record, source, target, event_type.value, str(payload.get("reason", "")))
        ended = self.tree.ended(record, target, str(payload.get("reason", ""))) if target in _ENDS else []
        if target in EVICTED and self.store.durable:
            # Finished for good: the store answers for it from now on (memory stays flat
            # however many tasks a system runs).  Failed ones stay: they may be retried.
            self.records.pop(record.task_id, None)
        else:  # still moving: held where the queue and reports look it up (also one read from the store)
            self.records[record.task_id] = record
        return [notice, *ended]

    def _notify(self, record: TaskRecord, source: str, target: str, event: str, reason: str = "") -> TransitionNotice:
        return TransitionNotice(record.task_id, MachineName.LIFECYCLE, source, target, event,
                      record.lifecycle.updated_at.isoformat(), {"reason": reason} if reason else {})

