"""The task-run core: one run of a task's cognitive machine, ``TaskRun.step(input) -> list[Command]``.

``step`` never raises: an error fails the task, and when even that fails (or the snapshot cannot be
read) the activation is abandoned and the run restarts from its checkpoint.  It owns the tokens (a
stale answer is dropped), the loop over the machine's table, checkpoints, the tool-step journal (a
finished step is replayed, never run again), exit reasons and messages sent to the running task.
``snapshot()`` is the run as a value; ``TaskRun(snapshot)`` brings it back in any process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, ClassVar

from pegasus import codec
from pegasus.cognitive.base import INTERRUPTED
from pegasus.levels import Level
from pegasus.tools.memory import is_memory_tool
from pegasus.run.commands import Abandon, AskRecall, ChildStep, Command, Log, SendStage, TaskStopped, TaskTransitioned
from pegasus.run.inputs import (
    Answered, MemoriesRecalled, MessagesSent, RecallAnswer, RunInput, StageAnswer, Started, Streamed, SuspendAsked,
)
from pegasus.run.recall import RECALL_STAGES, needs_recall, recall_query, recalled
from pegasus.run.snapshot import RunSnapshot, ended, step_key, sub_task_key
from pegasus.store.checkpoint import Checkpointer, kind_for
from pegasus.store.journal import ENDED, FINISHED, INTERRUPTED_STATUS, StepEnd
from pegasus.task.dispatch import RaiseEvent, RunStage, next_work
from pegasus.task.errors import InvalidStateTransition
from pegasus.task.events import Event, EventType, new_id, utc_now
from pegasus.task.fsm import Clock, IdFactory, TaskFSM
from pegasus.task.names import CognitiveState, PoolName, StageName
from pegasus.tools.registry import EffectClass

# Why a stage failed (its answer's error_kind) -> seed 002's exit_reason for the failed task.
EXIT_REASON_BY_KIND = {"timeout": "timeout", "worker_died": "exception", "queue_full": "exception",
                       "exception": "exception", "rate_limited": "retry_exhausted"}
STEP_ENDS = frozenset({EventType.TOOL_CALL_COMPLETED, EventType.TOOL_CALL_FAILED, EventType.STEP_COMPLETED})
LOST = ("worker_died", "timeout")  # a tool step whose worker is gone: it may have run

EffectOf = Callable[[str], EffectClass | None]
"""A tool's effect class by name (None: unknown, which counts as effectful)."""


def _unknown(tool: str) -> EffectClass | None:
    return None


class TaskRun:
    """One run of one task; see the module docstring."""

    def __init__(self, state: RunSnapshot, *, effect_of: EffectOf = _unknown, clock: Clock = utc_now,
                 ids: IdFactory = new_id, pid: int = 0, debug: bool = False) -> None:
        self.task_id: str = getattr(state.task, "task_id", "")
        self.run, self.token, self.stopped = state.run, state.token, state.stopped
        self.unreadable: Exception | None = None  # the snapshot could not be restored: step abandons
        try:
            self.fsm = TaskFSM.restore(state.task, clock=clock, id_factory=ids, share=True)
            self.checkpointer = Checkpointer(state.task, state.checkpoint_base, state.checkpoint_source)
        except Exception as exc:  # noqa: BLE001 - never raise: the carrier lets the activation go
            self.unreadable, self.stopped = exc, True
        self.clock, self.ids = clock, ids
        self.generation, self.journal, self.awaited = state.generation, state.journal, state.awaited
        self.max_iterations = state.max_iterations
        self.step_in_flight = state.step_in_flight
        self.redispatched = set(state.redispatched)  # effectful steps sent again after their worker was lost
        self.exit_reason = state.exit_reason
        self.inbox = state.inbox
        self.recall_k, self.identity = state.recall_k, state.identity
        self.effect_of = effect_of
        self.pid = pid  # the process carrying the run (named in its transition reports)
        self.debug = debug  # its carrier writes debug lines: a transition's line is made (else not even built)
        self._out: list[Command] = []

    def step(self, event: RunInput) -> list[Command]:
        """Apply one input; the commands to carry out, in order.  Never raises."""
        if self.unreadable is not None:
            exc = self.unreadable
            return [Log(Level.ERROR, "task_actor_error", {}, exc),
                    Abandon(f"the run cannot start: {type(exc).__name__}: {exc}")]
        try:
            return self._HANDLERS[type(event)](self, event)
        except Exception as exc:  # noqa: BLE001 - an input the handlers could not even read
            return [Log(Level.ERROR, "task_actor_error", {"input": type(event).__name__}, exc)]

    def snapshot(self) -> RunSnapshot:
        """The run as a value (what ``TaskRun(snapshot)`` restores)."""
        return RunSnapshot(self.fsm.snapshot(share=True), self.run, self.max_iterations, self.generation, self.journal,
                           self.token, self.step_in_flight, frozenset(self.redispatched), self.checkpointer.base,
                           self.exit_reason, self.stopped, self.inbox, self.recall_k, self.identity,
                           self.checkpointer.source, self.awaited)

    def current(self, task_id: str, token: int) -> bool:
        """Whether an answer (or streamed text) with ``token`` is for this run: any other is dropped."""
        return not self.stopped and token == self.token and task_id == self.task_id

    # -- inputs -------------------------------------------------------------------------------
    def _started(self, event: Started) -> list[Command]:
        return self._handle(self._start, event.resume_event, dict(event.resume_payload))

    def _answered_input(self, event: Answered) -> list[Command]:
        answer = event.answer
        if not self.current(answer.task_id, answer.token):
            return [Log(Level.INFO, "stale_result_dropped",
                        {"stage": answer.stage, "token": answer.token, "current": self.token})]
        return self._handle(self._answered, answer)

    def _recalled_input(self, event: MemoriesRecalled) -> list[Command]:
        answer = event.answer
        if not self.current(answer.task_id, answer.token):
            return [Log(Level.INFO, "stale_recall_dropped", {"token": answer.token, "current": self.token})]
        return self._handle(self._recalled, answer)

    def _streamed(self, event: Streamed) -> list[Command]:
        delta = event.delta
        return [replace(delta, run=self.run)] if self.current(delta.task_id, delta.token) else []

    def _suspend_asked(self, event: SuspendAsked) -> list[Command]:
        if self.stopped or event.task_id != self.task_id:
            return []
        return self._handle(self._suspend, event.reason)

    def _messages_sent(self, event: MessagesSent) -> list[Command]:
        if self.stopped or event.task_id != self.task_id:
            return []
        known = {number for number, _ in self.inbox}
        self.inbox += tuple(entry for entry in event.entries if entry[0] not in known)
        return [Log(Level.INFO, "message_waiting", {"messages": len(self.inbox)})]

    _HANDLERS: ClassVar[dict[type, Callable[[TaskRun, Any], list[Command]]]] = {
        Started: _started, Answered: _answered_input, MemoriesRecalled: _recalled_input, Streamed: _streamed,
        SuspendAsked: _suspend_asked, MessagesSent: _messages_sent,
    }

    def _recalled(self, answer: RecallAnswer) -> None:
        self.token += 1
        recall = recalled(self.fsm.context.iteration, answer.identity, list(answer.items), answer.error)
        if answer.error:
            self._log(Level.WARNING, "recall_failed", error=answer.error)
        self.fsm.replace_context(recall=recall)  # checkpointed with the stage's transition (else recalled again)
        self._advance()

    def _handle(self, step: Callable[..., None], *args: Any) -> list[Command]:
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - never raise: the task fails instead
            self._out.append(Log(Level.ERROR, "task_actor_error", {}, exc))
            self._give_up(exc)
        out, self._out = self._out, []
        return out

    def _give_up(self, exc: Exception) -> None:
        """Fail the task; failing that, stop with what there is; failing that too, abandon."""
        try:
            if not self.stopped and not self.fsm.is_terminal:
                self._fail("exception", f"internal error: {type(exc).__name__}: {exc}")
                return
        except Exception:  # noqa: BLE001 - failing failed: stop with what there is
            pass
        if any(isinstance(command, TaskStopped) for command in self._out):
            return
        try:
            self._stop()
        except Exception as last:  # noqa: BLE001
            self._out.append(Abandon(f"the run cannot go on: {type(last).__name__}: {last}"))

    def _start(self, resume_event: str | None, resume_payload: dict[str, Any]) -> None:
        if resume_event is None:
            self._advance()
        else:
            self._apply(self._event(resume_event, resume_payload))

    def _answered(self, answer: StageAnswer) -> None:
        self.token += 1  # answered: anything else with this token is stale
        stage = {"stage": answer.stage, **answer.worker, "ok": answer.ok, "error": answer.error}
        recall = self.fsm.context.recall
        if answer.stage in RECALL_STAGES and recall is not None:
            stage["memories"] = recall.ids  # what the stage was given: the history says why it answered so
            if recall.error:
                stage["recall_error"] = recall.error  # e.g. no vector for the query: recalled by full text alone
            done_before = (answer.payload.get("reasoning") or {}).get("done_before") if answer.ok else None
            if isinstance(done_before, dict):  # the recalled episode of the same request (not in the result)
                stage["done_before"] = done_before
        if answer.ok and answer.event_type is not None:
            if answer.event_type == EventType.TASK_FAILED:  # the stage gave up (a failed tool step)
                self.exit_reason = str(answer.payload.get("exit_reason") or "exception")
            self._apply(self._event(answer.event_type, answer.payload), stage)
        elif answer.stage == StageName.ACT:
            self._act_failed(answer, stage)
        else:
            self._fail(EXIT_REASON_BY_KIND.get(answer.error_kind, "exception"),
                       f"{answer.stage} stage failed: {answer.error}", stage)

    def _suspend(self, reason: str) -> None:
        if not self.fsm.can_transition(EventType.TASK_SUSPENDED):
            self._log(Level.INFO, "suspend_refused", state=self.fsm.state)
            return
        self._apply(self._event(EventType.TASK_SUSPENDED, {"reason": reason}))

    # -- the loop -------------------------------------------------------------------------------
    def _apply(self, event: Event, stage: dict[str, Any] | None = None, advance: bool = True) -> None:
        fsm = self.fsm
        source = fsm.state
        try:
            target = fsm.transition(event)
        except InvalidStateTransition as exc:
            self._log(Level.ERROR, "transition_refused", state=source, trigger=str(event.type), error=str(exc))
            if not fsm.is_terminal:
                self._fail("exception", f"internal: {exc}", stage)
            return
        # A debug line, made only for a carrier that writes them: the report below is stored with all of it
        # (`pegasus logs` reads it there); at info, a line a transition cost the task actor ~12% of its handlers'
        # CPU (a structlog render, a flock and a write).
        if self.debug:
            self._log(Level.DEBUG, "transition", state=target, trigger=str(event.type), from_state=source)
        kind = kind_for(target, str(event.type))
        task = fsm.snapshot(share=True) if kind == "full" else fsm  # a full one encodes a snapshot: no copy for it
        checkpoint = (kind, self.checkpointer.make(kind, task)) if kind else None
        finish = None
        if self.step_in_flight is not None and event.type in STEP_ENDS:
            finish = self._step_end(self.step_in_flight, event)
            self.step_in_flight = None
        self._out.append(TaskTransitioned(fsm.task_id, self.run, source, target, str(event.type),
                                          _iso(fsm.updated_at), stage, checkpoint, finish, self.pid))
        if advance:
            self._advance()

    def _advance(self) -> None:
        fsm = self.fsm
        if self._take_messages():
            return
        work = next_work(fsm.machine, fsm.state, fsm.context)
        if not isinstance(work, (RunStage, RaiseEvent)):  # suspended or terminal: the run is over
            self._stop()
        elif fsm.context.iteration > self.max_iterations:
            self._fail("max_iterations", f"gave up after {self.max_iterations} think/act/reflect rounds")
        elif isinstance(work, RaiseEvent):
            self._apply(self._event(work.event_type))
        else:
            self.token += 1
            if not needs_recall(work.stage, fsm.context, max(self.recall_k, 1)):
                self._run_stage(work)
            elif self.recall_k:  # the supervisor answers with the identity and the memories
                self._out.append(AskRecall(fsm.task_id, self.run, self.token, recall_query(fsm.context),
                                           self.recall_k))
            else:  # recall off: the identity the run was started with, no memories
                fsm.replace_context(recall=recalled(fsm.context.iteration, self.identity, []))
                self._run_stage(work)

    def _take_messages(self) -> bool:
        """Seed 004's "inject the information, suspend and re-think": an active task with messages
        waiting suspends, then takes them all (SUSPENDED + MESSAGE_RECEIVED); a suspended one takes
        them at once.  False when there is none to take, or the task has ended (too late for them)."""
        fsm = self.fsm
        unread = tuple(entry for entry in self.inbox if entry[0] > fsm.context.messages_taken)
        self.inbox = unread
        if not unread or fsm.is_terminal:
            return False
        if fsm.state != fsm.machine.suspended:
            if not fsm.can_transition(EventType.TASK_SUSPENDED):
                return False  # not started yet (idle): taken once it is
            self._apply(self._event(EventType.TASK_SUSPENDED, {"reason": "a message arrived"}), advance=False)
        self.inbox = ()
        self._apply(self._event(EventType.MESSAGE_RECEIVED, {"messages": [text for _, text in unread],
                                                             "through": max(number for number, _ in unread)}))
        return True

    def _run_stage(self, work: RunStage) -> None:
        """A stage over a plan step goes through the journal: replayed when it ended before."""
        if work.step_index is None:
            self._send(work, None)
            return
        key = step_key(self.task_id, self.generation, self.fsm.context.iteration, work.step_index)
        if self._step_type(work.step_index) == "sub_task":
            key = sub_task_key(self.task_id, self.generation, self.fsm.context, work.step_index)
        known = self.journal.get(key)
        if self._step_type(work.step_index) == "sub_task" and not ended(known):
            self._await_children()  # never sent to a worker: a worker waiting on a child would hold its slot
        elif known is not None:
            self._replay(work, key, known)
        elif self._effect(work.step_index) == "pure":
            self._send(work, None)  # a pure step may run again: no journal row needed
        else:
            self._send(work, key)

    def _await_children(self) -> None:
        """Stop the run to wait for the children of the consecutive sub_task steps from the current one
        (fan-out); the supervisor writes each child's end as its step's journal row and starts the run
        again once all have ended (fan-in), which replays them as the steps' results."""
        fsm = self.fsm
        plan = fsm.context.plan
        assert plan is not None and plan.current_step is not None
        children = []
        for step in plan.steps[plan.steps.index(plan.current_step):]:
            if step.completed or step.action_type != "sub_task":
                break
            children.append(ChildStep(sub_task_key(self.task_id, self.generation, fsm.context, step.index),
                                      step.index, dict(step.action_params)))
        self._log(Level.INFO, "waiting_for_children", steps=[child.step_index for child in children])
        self.stopped = True
        self.token += 1  # nothing is in flight, but nothing may answer this run any more
        self._out.append(TaskStopped(fsm.task_id, self.run, fsm.state, fsm.snapshot(share=True), None,
                                      tuple(children)))

    def _step_type(self, step_index: int) -> str | None:
        plan = self.fsm.context.plan
        step = next((s for s in plan.steps if s.index == step_index), None) if plan else None
        return None if step is None else step.action_type

    def _send(self, work: RunStage, key: str | None) -> None:
        fsm = self.fsm
        self.step_in_flight = key
        journal = key is not None and work.step_index is not None and self._effect(work.step_index) == "effectful"
        # A memory tool runs where the store is (the supervisor): no tool worker opens the database.
        pool = PoolName.MEMORY if work.step_index is not None and is_memory_tool(self._tool(work.step_index)) \
            else work.pool
        self._out.append(SendStage(pool, fsm.task_id, self.run, self.token, work.stage, fsm.machine.name,
                                   fsm.context, work.step_index, key, journal, fsm.priority))

    def _act_failed(self, answer: StageAnswer, stage: dict[str, Any]) -> None:
        """A tool step came back failed.  The journal decides whether an effectful one ran:
        a refused start carries its row; a lost worker's step is sent once more, and its
        new worker's start finds out (no row: it never started, and runs now)."""
        fsm = self.fsm
        error = answer.error or "tool step failed"
        step = fsm.context.plan.current_step if fsm.context.plan else None
        work = next_work(fsm.machine, fsm.state, fsm.context)
        key = self.step_in_flight
        if answer.error_kind == "not_started" and key and answer.payload.get("journal") and isinstance(work, RunStage):
            self._replay(work, key, dict(answer.payload["journal"]))
            return
        if answer.error_kind in LOST and step and self._effect(step.index) == "effectful":
            if key and key not in self.redispatched and isinstance(work, RunStage):
                self.redispatched.add(key)
                self._log(Level.WARNING, "step_redispatched", key=key, error=error)
                self._send(work, key)  # (the token moved on when this answer arrived)
                return
            error = f"{INTERRUPTED} ({error})"  # it may have had its effect: never run it again
        # A failed tool step is the reflection's to judge (seed 000: TOOL_CALL_FAILED).
        self._step_failed(error, stage)

    def _replay(self, work: RunStage, key: str, row: dict[str, Any]) -> None:
        """A step the journal already knows (a restarted run): never run a finished step again."""
        if row.get("status") in ENDED and row.get("result"):
            self._log(Level.INFO, "journal_replayed", key=key)
            self.step_in_flight = None
            result = row["result"]
            self._apply(self._event(result["event_type"], result["payload"]))
        elif row.get("effect") in ("pure", "idempotent"):
            self._log(Level.INFO, "journal_rerun", key=key, effect=row.get("effect"))
            self._send(work, key)
        else:
            self._log(Level.WARNING, "journal_interrupted", key=key, effect=row.get("effect"))
            self.step_in_flight = key
            self._step_failed(INTERRUPTED, {"stage": StageName.ACT.value, "ok": False, "error": INTERRUPTED})

    def _step_end(self, key: str, event: Event) -> StepEnd:
        result = event.payload.get("result") or {}
        index = int(result.get("step_index", 0))
        status = INTERRUPTED_STATUS if str(result.get("error") or "").startswith(INTERRUPTED) else FINISHED
        record = {"event_type": str(event.type), "payload": event.payload}
        return StepEnd(key, status, codec.pack(record), index, self._tool(index),
                       self._effect(index))

    def _step_failed(self, error: str, stage: dict[str, Any] | None) -> None:
        plan = self.fsm.context.plan
        step = plan.current_step if plan else None
        failure = {"step_index": step.index if step else 0, "success": False,
                   "tool": step.action_params.get("tool") if step else None,
                   "params": dict(step.action_params.get("args") or {}) if step else {}, "error": error}
        self._apply(self._event(EventType.TOOL_CALL_FAILED, {"result": failure}), stage)

    def _tool(self, step_index: int) -> str | None:
        plan = self.fsm.context.plan
        step = next((s for s in plan.steps if s.index == step_index), None) if plan else None
        if step is None or step.action_type != "tool_call":
            return None
        return str(step.action_params.get("tool"))

    def _effect(self, step_index: int) -> EffectClass:
        """The step's effect class; an unknown tool counts as effectful (never repeated)."""
        tool = self._tool(step_index)
        if tool is None:
            return "pure"
        return self.effect_of(tool) or "effectful"

    def _fail(self, exit_reason: str, error: str, stage: dict[str, Any] | None = None) -> None:
        self.exit_reason = exit_reason
        self._apply(self._event(EventType.TASK_FAILED, {"exit_reason": exit_reason, "error": error}), stage)

    def _stop(self) -> None:
        fsm = self.fsm
        self.stopped = True
        self.token += 1  # whatever is still in flight is stale now
        exit_reason = (self.exit_reason or "exception") if fsm.state == CognitiveState.FAILED else None
        self._out.append(TaskStopped(fsm.task_id, self.run, fsm.state, fsm.snapshot(share=True), exit_reason,
                                     awaited=self.awaited))

    def _event(self, event_type: str, payload: dict[str, Any] | None = None) -> Event:
        return Event(type=event_type, payload=payload or {}, id=self.ids(), timestamp=self.clock())

    def _log(self, level: Level, event: str, **fields: Any) -> None:
        self._out.append(Log(level, event, fields))


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()
