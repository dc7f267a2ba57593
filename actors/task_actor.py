"""The task actor: one per running task, owning its cognitive TaskFSM.

Its mailbox serialises the task's transitions.  After each transition it asks
``pegasus.task.dispatch.next_work`` what comes next and sends that to a pool;
it never blocks.  Every stage request carries a token; a result whose token is
not the current one (the task moved on, was suspended or canceled) is dropped,
never applied.  When the machine suspends, completes or fails, the actor hands
its snapshot to the supervisor and is free again: the supervisor gives it the
next run (any task's) or retires it (passivation: a suspended task costs rows in
the store, not a process).  Reusing the process saves a fork, Thespian's
start-up and exit messages and new TCP connections to the supervisor, the pools
and the workers: measured ~23 ms of CPU per task of the 62 a task cost.  The
actor carries nothing from one run to the next but its request token, which only
grows, so a late answer to an earlier run's request is stale here too.

Reports to the supervisor go as one TaskReports message per handler (a
transition, the one its RaiseEvent chain adds, a journal entry, the stop).
They are never held back for a later handler: with a slow stage, ``get``
would show a state one stage old.  (Holding them back at most 20 ms with a
``wakeupAfter`` timer was tried: two 1,500-task runs each left 2-4 tasks
whose later reports never reached the supervisor -- Thespian issue #26
describes sends made from a wakeup handler stalling in the transmit queue.
Without the timer, none.)

Durability: each checkpointed transition report carries the checkpoint the seeds ask for
(``pegasus.store.checkpoint``).  A tool step whose tool is not ``pure`` carries
an idempotency key made of task, attempt, iteration and step, and its end is
journalled with the transition that applies it.  An effectful step is journalled
as started by the worker about to run it (``StepStarting``, written by the
supervisor before the tool runs), not when it is sent: one still queued when
everything died provably never started and runs after the restart.  On a
restart a finished step is never run again; a started-but-unfinished one is run
again only when its tool is idempotent, otherwise it is reported interrupted
(its effect unknown: the task's ``effects_unknown``).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import msgpack
from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors import messages as m
from actors import procs
from pegasus import logs
from pegasus.cognitive.base import INTERRUPTED
from pegasus.config import Settings
from pegasus.store.checkpoint import Checkpointer, kind_for
from pegasus.store.journal import ENDED, FINISHED, INTERRUPTED_STATUS, StepEnd
from pegasus.task import Event, EventType, InvalidStateTransition, TaskFSM
from pegasus.task.dispatch import RaiseEvent, RunStage, next_work
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolError, ToolRegistry

# Why an llm stage failed -> seed 002's exit_reason for the failed task.
_EXIT_REASON = {"timeout": "timeout", "worker_died": "exception", "queue_full": "exception", "exception": "exception"}
_STEP_EVENTS = frozenset({"TOOL_CALL_COMPLETED", "TOOL_CALL_FAILED", "STEP_COMPLETED"})
_EFFECT_REGISTRIES: dict[str, ToolRegistry] = {}


def effect_registry(settings: Settings) -> ToolRegistry:
    """The tools of ``settings``, for their effect classes only (a task actor never runs a tool).

    Built once per process and tools configuration.  The supervisor builds it
    before it forks task actors, so each inherits it (plugins imported, models
    built) instead of paying for it per task (measured: ~6% of a task actor's CPU).
    """
    key = settings.tools.model_dump_json() + settings.mcp.model_dump_json()
    if key not in _EFFECT_REGISTRIES:
        _EFFECT_REGISTRIES[key] = registry_for(settings)
    return _EFFECT_REGISTRIES[key]


def step_key(task_id: str, generation: str, iteration: int, step_index: int) -> str:
    """The idempotency key of one tool step (task, attempt, iteration, step).

    ``generation`` names the attempt: it changes when the task is deliberately
    run again (retry, a failed gate) and stays the same across restarts after a
    crash, so a restarted run finds its own steps in the journal.
    """
    return f"{task_id}/a{generation}/i{iteration}/s{step_index}"


class TaskActor(ActorTypeDispatcher):
    """Runs one task's cognitive machine; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.supervisor: Any = None
        self.registry: ToolRegistry | None = None
        self.token = 0  # never reset: a request of an earlier run stays stale
        self.outbox: list[Any] = []  # reports not sent yet
        self._free()

    def _free(self) -> None:
        """Forget the run: the actor waits for the next StartTask."""
        self.fsm: TaskFSM | None = None
        self.start: m.StartTask | None = None
        self.checkpointer: Checkpointer | None = None
        self.journal_key: str | None = None  # the journalled step now in flight
        self.redispatched: set[str] = set()  # effectful steps sent again after their worker was lost
        self.stopped = False
        self.finished = False  # the run is over: free once the outbox is flushed
        self.exit_reason: str | None = None
        self.log = logs.get("task")

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # The boundary: an unexpected error fails this task cleanly; it never
        # raises into Thespian (which would re-deliver the message, then poison it).
        try:
            super().receiveMessage(message, sender)
        except Exception as exc:  # noqa: BLE001
            self.log.exception("task_actor_error")
            if self.fsm is None and isinstance(message, m.StartTask):
                # This process could not take the run: it exits, and the supervisor
                # restarts the run from its checkpoint in a new process, as after a crash.
                self.send(self.myAddress, ActorExitRequest())
            elif self.fsm is not None and not self.stopped and not self.fsm.is_terminal:
                try:
                    self._fail("exception", f"internal error: {type(exc).__name__}: {exc}")
                except Exception:  # noqa: BLE001 - last resort: report what we have
                    self._stop()
        finally:
            self._flush()

    def _report(self, message: Any) -> None:
        """Queue a report for the supervisor; the handler's reports go, in order, in one
        TaskReports when it ends.

        The next stage request goes to its pool first: a hop does not wait for the
        report (measured: ~1 ms of each hop on this machine).
        """
        self.outbox.append(message)

    def _flush(self) -> None:
        if self.outbox:
            outbox, self.outbox = self.outbox, []
            self.send(self.supervisor, m.TaskReports(outbox[0].task_id, self._run, tuple(outbox)))
        if self.finished:
            self._free()

    def receiveMsg_StartTask(self, start: m.StartTask, sender: Any) -> None:
        if self.fsm is not None:
            return
        logs.configure_from(start.settings)
        self.start, self.supervisor = start, sender
        self.fsm = TaskFSM.restore(start.snapshot)
        self.checkpointer = Checkpointer(start.snapshot)
        if self.registry is None:  # once per process: its runs all come from one system's settings
            try:
                # Effect classes only: effect_of answers from the configuration and never
                # starts an MCP server in this process.
                self.registry = effect_registry(start.settings)
            except ToolError as exc:
                self.log.error("tool_registry_unavailable", error=str(exc))
        self.log = logs.get("task", task_id=self.fsm.task_id, machine=self.fsm.machine.name, run=start.run)
        if start.resume_event is not None:
            self._apply(Event(type=start.resume_event, payload=start.resume_payload))
        else:
            self._advance()

    def receiveMsg_StageResult(self, result: m.StageResult, sender: Any) -> None:
        if self.fsm is None or self.stopped or result.token != self.token or result.task_id != self.fsm.task_id:
            self.log.info("stale_result_dropped", stage=result.stage, token=result.token, current=self.token)
            return
        self.token += 1  # this request is answered: anything else with its token is stale
        stage = {"stage": result.stage, **result.worker, "ok": result.ok, "error": result.error}
        if result.ok and result.event_type is not None:
            if result.event_type == EventType.TASK_FAILED:  # the stage gave up (a failed tool step)
                self.exit_reason = str(result.payload.get("exit_reason") or "exception")
            self._apply(Event(type=result.event_type, payload=result.payload), stage)
        elif result.stage == "act":
            self._act_failed(result, stage)
        else:
            self._fail(_EXIT_REASON.get(result.error_kind, "exception"),
                       f"{result.stage} stage failed: {result.error}", stage)

    def receiveMsg_SuspendTask(self, request: m.SuspendTask, sender: Any) -> None:
        if self.fsm is None or self.stopped or request.task_id != self.fsm.task_id:
            return  # a run that is over (the request crossed its TaskStopped)
        if not self.fsm.can_transition(EventType.TASK_SUSPENDED):
            self.log.info("suspend_refused", state=self.fsm.state)
            return
        self._apply(Event(type=EventType.TASK_SUSPENDED, payload={"reason": request.reason}))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.stopped = True

    # -- the loop -------------------------------------------------------------------------
    def _apply(self, event: Event, stage: dict[str, Any] | None = None) -> None:
        fsm, checkpointer = self.fsm, self.checkpointer
        assert fsm is not None and checkpointer is not None
        source = fsm.state
        try:
            target = fsm.transition(event)
        except InvalidStateTransition as exc:
            self.log.error("transition_refused", state=source, trigger=str(event.type), error=str(exc))
            if not fsm.is_terminal:
                self._fail("exception", f"internal: {exc}", stage)
            return
        self.log.info("transition", state=target, trigger=str(event.type), from_state=source)
        kind = kind_for(target, str(event.type))
        checkpoint = (kind, checkpointer.make(kind, fsm)) if kind else None
        finish = None
        if self.journal_key is not None and str(event.type) in _STEP_EVENTS:
            finish = self._step_end(self.journal_key, event)
            self.journal_key = None
        self._report(m.TaskTransitioned(
            fsm.task_id, self._run, source, target, str(event.type), _iso(fsm.updated_at), stage,
            checkpoint, finish, os.getpid()))
        self._advance()

    def _advance(self) -> None:
        fsm, start = self.fsm, self.start
        assert fsm is not None and start is not None
        if fsm.is_terminal or fsm.state == fsm.machine.suspended:
            self._stop()
            return
        limit = start.settings.runtime.max_iterations
        if fsm.context.iteration > limit:
            self._fail("max_iterations", f"gave up after {limit} think/act/reflect rounds")
            return
        work = next_work(fsm.machine.name, fsm.state, fsm.context)
        if isinstance(work, RaiseEvent):
            self._apply(Event(type=work.event_type))
        elif isinstance(work, RunStage):
            self.token += 1
            if work.stage != "act" or work.step_index is None:
                self._dispatch(work, None)
                return
            key = step_key(fsm.task_id, start.generation, fsm.context.iteration, work.step_index)
            known = start.journal.get(key)
            if known is not None:
                self._replay_journal(work, key, known)
            elif self._effect(work.step_index) == "pure":
                self._dispatch(work, None)  # a pure step may run again: no journal row needed
            else:
                self._dispatch(work, key)

    def _dispatch(self, work: RunStage, key: str | None) -> None:
        """Send the stage to its pool.  An effectful step goes with the supervisor's address:
        its worker journals it as started there before it runs the tool (only these steps
        pay that round trip)."""
        fsm, start = self.fsm, self.start
        assert fsm is not None and start is not None
        self.journal_key = key
        pool = start.llm_pool if work.pool == "llm" else start.tool_pool
        effectful = key is not None and work.step_index is not None and self._effect(work.step_index) == "effectful"
        self.send(pool, m.StageRequest(fsm.task_id, self.token, work.stage, fsm.machine.name, fsm.context,
                                       work.step_index, idempotency_key=key,
                                       journal_to=self.supervisor if effectful else None, run=self._run))

    def _act_failed(self, result: m.StageResult, stage: dict[str, Any]) -> None:
        """A tool step came back failed.  The journal decides whether an effectful one ran:
        a refused start carries its row; a lost worker's step is sent once more, and its
        new worker's StepStarting finds out (no row: it never started, and runs now)."""
        fsm = self.fsm
        assert fsm is not None
        error = result.error or "tool step failed"
        step = fsm.context.plan.current_step if fsm.context.plan else None
        work = next_work(fsm.machine.name, fsm.state, fsm.context)
        key = self.journal_key
        if result.error_kind == "not_started" and key and result.payload.get("journal") and isinstance(work, RunStage):
            self._replay_journal(work, key, dict(result.payload["journal"]))
            return
        if result.error_kind in ("worker_died", "timeout") and step and self._effect(step.index) == "effectful":
            if key and key not in self.redispatched and isinstance(work, RunStage):
                self.redispatched.add(key)
                self.log.warning("step_redispatched", key=key, error=error)
                self._dispatch(work, key)  # (the token moved on when this result arrived)
                return
            error = f"{INTERRUPTED} ({error})"  # it may have had its effect: never run it again
        # A failed tool step is the reflection's to judge (seed 000: TOOL_CALL_FAILED).
        self._step_failed(error, stage)

    def _step_end(self, key: str, event: Event) -> StepEnd:
        fsm = self.fsm
        assert fsm is not None
        result = event.payload.get("result") or {}
        index = int(result.get("step_index", 0))
        status = INTERRUPTED_STATUS if str(result.get("error") or "").startswith(INTERRUPTED) else FINISHED
        record = {"event_type": str(event.type), "payload": event.payload}
        return StepEnd(key, status, msgpack.packb(record, use_bin_type=True), index, self._tool(index),
                       self._effect(index))

    def _replay_journal(self, work: RunStage, key: str, row: dict[str, Any]) -> None:
        """A step the journal already knows (a restarted run): never run a finished step again."""
        if row.get("status") in ENDED and row.get("result"):
            self.log.info("journal_replayed", key=key)
            self.journal_key = None
            result = row["result"]
            self._apply(Event(type=result["event_type"], payload=result["payload"]))
        elif row.get("effect") in ("pure", "idempotent"):
            self.log.info("journal_rerun", key=key, effect=row.get("effect"))
            self._dispatch(work, key)
        else:
            self.log.warning("journal_interrupted", key=key, effect=row.get("effect"))
            self.journal_key = key
            self._step_failed(INTERRUPTED, {"stage": "act", "ok": False, "error": INTERRUPTED})

    def _step_failed(self, error: str, stage: dict[str, Any] | None) -> None:
        assert self.fsm is not None
        step = self.fsm.context.plan.current_step if self.fsm.context.plan else None
        failure = {"step_index": step.index if step else 0, "success": False,
                   "tool": step.action_params.get("tool") if step else None,
                   "params": dict(step.action_params.get("args") or {}) if step else {}, "error": error}
        self._apply(Event(type=EventType.TOOL_CALL_FAILED, payload={"result": failure}), stage)

    def _tool(self, step_index: int) -> str | None:
        plan = self.fsm.context.plan if self.fsm else None
        step = next((s for s in plan.steps if s.index == step_index), None) if plan else None
        if step is None or step.action_type != "tool_call":
            return None
        return str(step.action_params.get("tool"))

    def _effect(self, step_index: int) -> str:
        """The step's effect class; an unknown tool counts as effectful (never repeated)."""
        tool = self._tool(step_index)
        if tool is None:
            return "pure"
        effect = self.registry.effect_of(tool) if self.registry is not None else None
        return effect or "effectful"

    def _fail(self, exit_reason: str, error: str, stage: dict[str, Any] | None = None) -> None:
        self.exit_reason = exit_reason
        self._apply(Event(type=EventType.TASK_FAILED, payload={"exit_reason": exit_reason, "error": error}), stage)

    def _stop(self) -> None:
        fsm = self.fsm
        assert fsm is not None
        self.stopped = True
        self.token += 1  # whatever is still in flight is stale now
        exit_reason = (self.exit_reason or "exception") if fsm.state == "failed" else None
        self._report(m.TaskStopped(fsm.task_id, self._run, fsm.state, fsm.snapshot(), exit_reason))
        self.finished = True

    @property
    def _run(self) -> int:
        return self.start.run if self.start else 0


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()
