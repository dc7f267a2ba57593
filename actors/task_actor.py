"""The task actor: one per running task, owning its cognitive TaskFSM.

Its mailbox serialises the task's transitions.  After each transition it asks
``pegasus.task.dispatch.next_work`` what comes next and sends that to a pool;
it never blocks.  Every stage request carries a token; a result whose token is
not the current one (the task moved on, was suspended or canceled) is dropped,
never applied.  When the machine suspends, completes or fails, the actor hands
its snapshot to the supervisor and exits.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors.messages import StageRequest, StageResult, StartTask, SuspendTask, TaskStopped, TaskTransitioned
from pegasus import logs
from pegasus.task import Event, EventType, InvalidStateTransition, TaskFSM
from pegasus.task.dispatch import RaiseEvent, RunStage, next_work

# Why an llm stage failed -> seed 002's exit_reason for the failed task.
_EXIT_REASON = {"timeout": "timeout", "worker_died": "exception", "queue_full": "exception",
                "exception": "exception"}


class TaskActor(ActorTypeDispatcher):
    """Runs one task's cognitive machine; see the module docstring."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # The boundary: an unexpected error fails this task cleanly; it never
        # raises into Thespian (which would re-deliver the message, then poison it).
        try:
            super().receiveMessage(message, sender)
        except Exception as exc:  # noqa: BLE001
            self.log.exception("task_actor_error")
            if self.fsm is not None and not self.stopped and not self.fsm.is_terminal:
                try:
                    self._fail("exception", f"internal error: {type(exc).__name__}: {exc}")
                except Exception:  # noqa: BLE001 - last resort: report what we have
                    self._stop()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fsm: TaskFSM | None = None
        self.start: StartTask | None = None
        self.supervisor: Any = None
        self.token = 0
        self.stopped = False
        self.exit_reason: str | None = None
        self.log = logs.get("task")

    def receiveMsg_StartTask(self, start: StartTask, sender: Any) -> None:
        if self.fsm is not None:
            return
        logs.configure_from(start.settings)
        self.start, self.supervisor = start, sender
        self.fsm = TaskFSM.restore(start.snapshot)
        self.log = logs.get("task", task_id=self.fsm.task_id, machine=self.fsm.machine.name)
        if start.resume_event is not None:
            self._apply(Event(type=start.resume_event, payload=start.resume_payload))
        else:
            self._advance()

    def receiveMsg_StageResult(self, result: StageResult, sender: Any) -> None:
        if self.fsm is None or self.stopped or result.token != self.token:
            self.log.info("stale_result_dropped", stage=result.stage, token=result.token, current=self.token)
            return
        self.token += 1  # this request is answered: anything else with its token is stale
        stage = {"stage": result.stage, **result.worker, "ok": result.ok, "error": result.error}
        if result.ok and result.event_type is not None:
            self._apply(Event(type=result.event_type, payload=result.payload), stage)
        elif result.stage == "act":
            # A failed tool step is the reflection's to judge (seed 000: TOOL_CALL_FAILED).
            step = self.fsm.context.plan.current_step if self.fsm.context.plan else None
            failure = {"step_index": step.index if step else 0, "success": False,
                       "tool": (step.action_params.get("tool") if step else None),
                       "error": result.error or "tool step failed"}
            self._apply(Event(type=EventType.TOOL_CALL_FAILED, payload={"result": failure}), stage)
        else:
            self._fail(_EXIT_REASON.get(result.error_kind, "exception"),
                       f"{result.stage} stage failed: {result.error}", stage)

    def receiveMsg_SuspendTask(self, request: SuspendTask, sender: Any) -> None:
        if self.fsm is None or self.stopped:
            return
        if not self.fsm.can_transition(EventType.TASK_SUSPENDED):
            self.log.info("suspend_refused", state=self.fsm.state)
            return
        self._apply(Event(type=EventType.TASK_SUSPENDED, payload={"reason": request.reason}))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.stopped = True

    # -- the loop -------------------------------------------------------------------------
    def _apply(self, event: Event, stage: dict[str, Any] | None = None) -> None:
        assert self.fsm is not None
        source = self.fsm.state
        try:
            target = self.fsm.transition(event)
        except InvalidStateTransition as exc:
            self.log.error("transition_refused", state=source, trigger=str(event.type), error=str(exc))
            if not self.fsm.is_terminal:
                self._fail("exception", f"internal: {exc}", stage)
            return
        self.log.info("transition", state=target, trigger=str(event.type), from_state=source)
        self.send(self.supervisor, TaskTransitioned(
            self.fsm.task_id, self._run, source, target, str(event.type), _iso(self.fsm.updated_at), stage))
        self._advance()

    def _advance(self) -> None:
        fsm = self.fsm
        assert fsm is not None and self.start is not None
        if fsm.is_terminal or fsm.state == fsm.machine.suspended:
            self._stop()
            return
        limit = int(self.start.settings.get("runtime", {}).get("max_iterations", 5))
        if fsm.context.iteration > limit:
            self._fail("max_iterations", f"gave up after {limit} think/act/reflect rounds")
            return
        work = next_work(fsm.machine.name, fsm.state, fsm.context)
        if isinstance(work, RaiseEvent):
            self._apply(Event(type=work.event_type))
        elif isinstance(work, RunStage):
            self.token += 1
            pool = self.start.llm_pool if work.pool == "llm" else self.start.tool_pool
            self.send(pool, StageRequest(fsm.task_id, self.token, work.stage, fsm.machine.name,
                                         fsm.context, work.step_index))

    def _fail(self, exit_reason: str, error: str, stage: dict[str, Any] | None = None) -> None:
        self.exit_reason = exit_reason
        self._apply(Event(type=EventType.TASK_FAILED, payload={"exit_reason": exit_reason, "error": error}), stage)

    def _stop(self) -> None:
        fsm = self.fsm
        assert fsm is not None
        self.stopped = True
        self.token += 1  # whatever is still in flight is stale now
        exit_reason = (self.exit_reason or "exception") if fsm.state == "failed" else None
        self.send(self.supervisor, TaskStopped(fsm.task_id, self._run, fsm.state, fsm.snapshot(), exit_reason))
        self.send(self.myAddress, ActorExitRequest())

    @property
    def _run(self) -> int:
        return self.start.run if self.start else 0


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()
