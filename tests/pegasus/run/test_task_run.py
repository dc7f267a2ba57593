"""The task-run core without an actor system: tokens, the journal, exit reasons, limits,
suspension, failed steps, and a run that passivates between every two events."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest

from pegasus import codec
from pegasus.cognitive.base import INTERRUPTED
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.run import Answered, Streamed, SuspendAsked, Abandon, Command, Log, RunSnapshot, SendStage, TaskRun, TaskStopped, TaskTransitioned, step_key
from pegasus.task import Plan, PlanStep, TaskFSM
from pegasus.task.names import CognitiveState as S, PoolName, StageName
from tests.pegasus.conftest import FixedClock, Ids, start_run


EFFECTS = {"append_key": "effectful", "fetch": "idempotent", "echo": "pure"}


def begin(task: TaskFSM, *, token: int = 0, journal: dict[str, Any] | None = None, max_iterations: int = 5,
          **kwargs: Any) -> tuple[TaskRun, list[Command]]:
    state = RunSnapshot(task.snapshot(), 1, max_iterations, "1.0", journal or {}, token)
    run, commands = start_run(state, effect_of=EFFECTS.get, clock=FixedClock(), ids=Ids(), **kwargs)
    assert run is not None
    return run, commands


def of(kind: type, commands: list[Command]) -> list[Any]:
    return [command for command in commands if isinstance(command, kind)]


def moves(commands: list[Command]) -> list[tuple[str, str]]:
    return [(r.from_state, r.to_state) for r in of(TaskTransitioned, commands)]


def answer(send: SendStage, event_type: str | None, payload: dict[str, Any] | None = None,
           **fields: Any) -> SimpleNamespace:
    """The answer to ``send`` as a StageResult carries it: ok with ``event_type``, else failed."""
    return SimpleNamespace(**{"task_id": send.task_id, "token": send.token, "stage": send.stage,
                              "ok": event_type is not None, "event_type": event_type, "payload": payload or {},
                              "error": None, "error_kind": "", "worker": {}, **fields})


def acting(tool: str, machine: str = "classic") -> TaskFSM:
    """A task at ACTING with one tool step (iteration 0)."""
    task = TaskFSM.create(machine, "x", task_id="t1")
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="d", action_params={"tool": tool, "args": {"n": 1}})])
    events = (["TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE", "PLAN_DONE"] if machine == "classic"
              else ["TASK_CREATED", "REASON_DONE"])
    for event in events:
        task.transition(event, plan=plan.model_dump(mode="json"))
    assert task.state == S.ACTING
    return task


def step_done(index: int = 0, tool: str = "append_key") -> dict[str, Any]:
    return {"result": {"step_index": index, "action_type": "tool_call", "tool": tool, "success": True, "output": "ok"}}


# -- the start ---------------------------------------------------------------------------------


def test_a_new_task_starts_and_asks_the_llm_pool_for_its_first_stage() -> None:
    run, commands = begin(TaskFSM.create("classic", "x", task_id="t1"), token=7)
    assert moves(commands) == [(S.IDLE, S.PERCEIVING)]
    [send] = of(SendStage, commands)
    assert (send.pool, send.stage, send.token, send.step_index, send.idempotency_key) == (
        PoolName.LLM, StageName.PERCEIVE, 8, None, None)  # a free actor's token only grows


def test_every_stage_request_carries_its_tasks_priority_for_the_pools_order() -> None:
    run, commands = begin(TaskFSM.create("classic", "x", task_id="t1", priority=2))
    [send] = of(SendStage, commands)
    assert send.priority == 2
    [send] = of(SendStage, run.step(Answered(answer(send, "PERCEIVE_DONE", {"perception": {}}))))
    assert (send.stage, send.priority) == (StageName.THINK, 2)


def test_a_snapshot_that_cannot_be_read_abandons_the_activation() -> None:
    run, commands = start_run(RunSnapshot(None, 1, 5))  # type: ignore[arg-type]
    assert run.stopped and isinstance(commands[-1], Abandon)
    assert of(Log, commands)[0].event == "task_actor_error"
    assert isinstance(run.step(SuspendAsked("t1", "hold"))[-1], Abandon)  # every input: still nothing to run


def test_step_is_the_one_entry_and_never_raises() -> None:
    """Issue 30: one core shape.  An input the core cannot read (an answer without its fields, a type
    it has no row for) is a log line, never an exception into the carrier."""
    run, _ = begin(acting("echo"))
    before = run.snapshot()
    for event in (Answered(SimpleNamespace()), "not an input"):
        [line] = run.step(event)  # type: ignore[arg-type]
        assert isinstance(line, Log) and line.event == "task_actor_error"
    assert run.snapshot() == before


def test_a_resumed_task_applies_its_resume_event_first() -> None:
    task = TaskFSM.create("classic", "x", task_id="t1")
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "NEED_MORE_INFO"):
        task.transition(event)
    _, commands = begin(task, resume_event="MESSAGE_RECEIVED", resume_payload={"text": "more"})
    assert moves(commands) == [(S.SUSPENDED, S.THINKING)]
    assert of(SendStage, commands)[0].stage == StageName.THINK


# -- tokens ------------------------------------------------------------------------------------


def test_only_the_answer_to_the_request_in_flight_is_applied() -> None:
    run, commands = begin(TaskFSM.create("classic", "x", task_id="t1"))
    [send] = of(SendStage, commands)
    current = answer(send, "PERCEIVE_DONE", {"perception": {}})
    for stale in (answer(send, "PERCEIVE_DONE", token=send.token - 1), answer(send, "PERCEIVE_DONE", task_id="t9")):
        assert [(type(c), c.event) for c in run.step(Answered(stale))] == [(Log, "stale_result_dropped")]
    assert moves(run.step(Answered(current))) == [(S.PERCEIVING, S.THINKING)]
    assert of(Log, run.step(Answered(current)))[0].event == "stale_result_dropped"  # a duplicate is stale too


def test_streamed_text_of_the_stage_in_flight_goes_on_with_the_run_and_stale_text_does_not() -> None:
    from pegasus.streaming import TextDelta

    run, commands = begin(TaskFSM.create("classic", "x", task_id="t1"))
    [send] = of(SendStage, commands)
    delta = TextDelta("t1", send.token, StageName.PERCEIVE, 1, '{"task_type"')
    assert run.step(Streamed(delta)) == [TextDelta("t1", send.token, StageName.PERCEIVE, 1, '{"task_type"', run=1)]
    for stale in (TextDelta("t1", send.token - 1, "perceive", 1, "x"), TextDelta("t9", send.token, "perceive", 1, "x")):
        assert run.step(Streamed(stale)) == []
    run.step(Answered(answer(send, "PERCEIVE_DONE", {"perception": {}})))
    assert run.step(Streamed(delta)) == []  # its stage has answered


def test_suspending_stops_the_run_and_makes_what_is_in_flight_stale() -> None:
    run, commands = begin(TaskFSM.create("classic", "x", task_id="t1"))
    [send] = of(SendStage, commands)
    assert run.step(SuspendAsked("t9", "not this task")) == []
    commands = run.step(SuspendAsked("t1", "hold"))
    [moved] = of(TaskTransitioned, commands)
    [stop] = of(TaskStopped, commands)
    assert (moved.to_state, moved.checkpoint[0]) == (S.SUSPENDED, "full")
    assert (stop.state, stop.exit_reason, stop.snapshot.context.suspended_state) == (S.SUSPENDED, None, S.PERCEIVING)
    assert run.stopped and run.token > send.token
    assert of(Log, run.step(Answered(answer(send, "PERCEIVE_DONE"))))[0].event == "stale_result_dropped"
    assert run.step(SuspendAsked("t1", "again")) == []


# -- exit reasons and limits ---------------------------------------------------------------------


@pytest.mark.parametrize("kind,reason", [("timeout", "timeout"), ("worker_died", "exception"),
                                         ("queue_full", "exception"), ("exception", "exception"), ("", "exception")])
def test_a_failed_llm_stage_fails_the_task_with_its_exit_reason(kind: str, reason: str) -> None:
    run, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"))
    [send] = of(SendStage, commands)
    commands = run.step(Answered(answer(send, None, error="deadline", error_kind=kind)))
    assert moves(commands) == [(S.REASONING, S.FAILED)]
    [stop] = of(TaskStopped, commands)
    assert (stop.state, stop.exit_reason) == (S.FAILED, reason)
    assert stop.snapshot.context.error == "reason stage failed: deadline"


def test_a_stage_that_gives_up_names_its_own_exit_reason() -> None:
    run, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"))
    [send] = of(SendStage, commands)
    commands = run.step(Answered(answer(send, "TASK_FAILED", {"exit_reason": "retry_exhausted", "error": "no"})))
    assert of(TaskStopped, commands)[0].exit_reason == "retry_exhausted"


def test_a_task_past_max_iterations_fails() -> None:
    task = TaskFSM.create("classic", "x", task_id="t1")
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE", "PLAN_DONE", "ACT_DONE"):
        task.transition(event)
    run, commands = begin(task, max_iterations=0)
    [send] = of(SendStage, commands)
    reflection = {"verdict": "continue", "assessment": "again"}
    commands = run.step(Answered(answer(send, "REFLECT_DONE", {"reflection": reflection, "verdict": "continue"})))
    assert moves(commands) == [(S.REFLECTING, S.THINKING), (S.THINKING, S.FAILED)]
    assert not of(SendStage, commands)
    assert of(TaskStopped, commands)[0].exit_reason == "max_iterations"


def test_an_internal_error_fails_the_task_instead_of_raising() -> None:
    def broken(tool: str) -> Any:
        raise RuntimeError("registry gone")

    state = RunSnapshot(acting("append_key").snapshot(), 1, 5)
    run, commands = start_run(state, effect_of=broken)
    assert run is not None and of(Log, commands)[0].error is not None
    [stop] = of(TaskStopped, commands)
    assert (stop.state, stop.exit_reason) == (S.FAILED, "exception")
    assert "internal error: RuntimeError: registry gone" in stop.snapshot.context.error


def test_when_even_stopping_fails_the_activation_is_abandoned() -> None:
    run, _ = begin(TaskFSM.create("classic", "x", task_id="t1"))

    def unreadable() -> Any:
        raise MemoryError("no snapshot")

    run.fsm.snapshot = unreadable  # type: ignore[method-assign]
    commands = run.step(SuspendAsked("t1", "hold"))  # its full checkpoint needs the snapshot
    assert [log.event for log in of(Log, commands)].count("task_actor_error") == 1
    assert isinstance(commands[-1], Abandon) and not of(TaskStopped, commands)


# -- tool steps and the journal -------------------------------------------------------------------

KEY = step_key("t1", "1.0", 0, 0)


@pytest.mark.parametrize("tool,key,journal", [("append_key", KEY, True), ("fetch", KEY, False),
                                              ("echo", None, False), ("unknown_tool", KEY, True)])
def test_a_step_carries_a_key_unless_pure_and_an_effectful_one_is_journalled(tool: str, key: str | None,
                                                                             journal: bool) -> None:
    _, commands = begin(acting(tool))
    [send] = of(SendStage, commands)
    assert (send.pool, send.stage, send.step_index, send.idempotency_key, send.journal) == (
        PoolName.TOOL, StageName.ACT, 0, key, journal)


@pytest.mark.parametrize("tool,key", [("memory.write", KEY), ("memory.append", KEY), ("memory.read", None),
                                      ("memory.search", None)])
def test_a_memory_step_goes_to_the_memory_pool_the_supervisor_with_its_key(tool: str, key: str | None) -> None:
    """Memory tools run where the store is; their writes are idempotent: keyed and journalled at their end only."""
    effects = {"memory.write": "idempotent", "memory.append": "idempotent", "memory.read": "pure",
               "memory.search": "pure"}
    state = RunSnapshot(acting(tool).snapshot(), 1, 5, "1.0", {}, 0)
    run, commands = start_run(state, effect_of=effects.get, clock=FixedClock(), ids=Ids())
    [send] = of(SendStage, commands)
    assert (send.pool, send.stage, send.idempotency_key, send.journal) == (PoolName.MEMORY, StageName.ACT, key, False)
    assert run is not None
    [moved] = of(TaskTransitioned, run.step(Answered(answer(send, "TOOL_CALL_COMPLETED", step_done(tool=tool)))))
    end = moved.journal_finish
    assert (end.key, end.effect) == (KEY, "idempotent") if end is not None else key is None


def test_a_finished_step_ends_in_the_journal_with_the_transition_that_applies_it() -> None:
    run, commands = begin(acting("append_key"))
    [send] = of(SendStage, commands)
    [moved] = of(TaskTransitioned, run.step(Answered(answer(send, "TOOL_CALL_COMPLETED", step_done()))))
    end = moved.journal_finish
    assert (end.key, end.status, end.step_index, end.tool) == (KEY, "finished", 0, "append_key")
    assert end.effect == "effectful"
    assert codec.unpack(end.result)["event_type"] == "TOOL_CALL_COMPLETED"
    assert moved.checkpoint[0] == "delta"


def _replayed(row: dict[str, Any]) -> list[Command]:
    return begin(acting("append_key"), journal={KEY: row})[1]


def test_a_finished_step_is_replayed_from_the_journal_never_run_again() -> None:
    row = {"status": "finished", "effect": "effectful",
           "result": {"event_type": "TOOL_CALL_COMPLETED", "payload": step_done()}}
    commands = _replayed(row)
    assert moves(commands) == [(S.ACTING, S.REFLECTING)]
    assert [send.stage for send in of(SendStage, commands)] == [StageName.REFLECT]
    assert of(TaskTransitioned, commands)[0].journal_finish is None  # already ended in the store


def test_a_started_effectful_step_is_reported_interrupted() -> None:
    commands = _replayed({"status": "started", "effect": "effectful"})
    [moved] = [r for r in of(TaskTransitioned, commands) if r.event == "TOOL_CALL_FAILED"]
    assert moved.journal_finish.status == "interrupted" and moved.stage["error"] == INTERRUPTED
    assert [send.stage for send in of(SendStage, commands)] == [StageName.REFLECT]


def test_a_started_idempotent_step_runs_again() -> None:
    [send] = of(SendStage, _replayed({"status": "started", "effect": "idempotent"}))
    assert (send.stage, send.idempotency_key, send.journal) == (StageName.ACT, KEY, True)


def test_a_step_that_never_started_runs() -> None:
    [send] = of(SendStage, begin(acting("append_key"), journal={"other/a1.0/i0/s0": {"status": "finished"}})[1])
    assert (send.stage, send.idempotency_key) == (StageName.ACT, KEY)


def test_a_lost_worker_s_effectful_step_is_sent_once_more_then_interrupted() -> None:
    run, commands = begin(acting("append_key"))
    [first] = of(SendStage, commands)
    [again] = of(SendStage, run.step(Answered(answer(first, None, error="died", error_kind="worker_died"))))
    assert (again.idempotency_key, again.journal, again.token) == (KEY, True, first.token + 1)
    commands = run.step(Answered(answer(again, None, error="died", error_kind="worker_died")))
    [moved] = of(TaskTransitioned, commands)
    assert moved.event == "TOOL_CALL_FAILED" and moved.journal_finish.status == "interrupted"
    assert moved.stage["error"] == "died"
    assert run.fsm.context.actions_done[-1].error == f"{INTERRUPTED} (died)"


def test_a_refused_start_replays_the_row_the_journal_holds() -> None:
    run, commands = begin(acting("append_key"))
    [send] = of(SendStage, commands)
    row = {"status": "finished", "result": {"event_type": "TOOL_CALL_COMPLETED", "payload": step_done()}}
    commands = run.step(Answered(answer(send, None, {"journal": row}, error="already finished", error_kind="not_started")))
    assert moves(commands) == [(S.ACTING, S.REFLECTING)]


@pytest.mark.parametrize("tool,kind", [("echo", "worker_died"), ("append_key", "tool")])
def test_other_failed_steps_are_the_reflection_s_to_judge(tool: str, kind: str) -> None:
    run, commands = begin(acting(tool))
    [send] = of(SendStage, commands)
    commands = run.step(Answered(answer(send, None, error="boom", error_kind=kind)))
    assert moves(commands) == [(S.ACTING, S.REFLECTING)] and not of(TaskStopped, commands)
    assert run.fsm.context.actions_done[-1].error == "boom"


def test_acting_with_no_step_left_ends_as_the_machine_says() -> None:
    for machine, event in (("classic", "ACT_DONE"), ("reason_act", "STEP_COMPLETED")):
        task = acting("echo", machine)
        task.context.plan.mark_done(0)
        _, commands = begin(task)
        assert of(TaskTransitioned, commands)[0].event == event


# -- a whole task, passivated between events --------------------------------------------------------


def drive(task: TaskFSM, passivate: bool) -> list[Command]:
    """Run ``task`` to its end on the offline processors; with ``passivate``, the run lives
    as a pickled snapshot between every two events and is restored to take the next."""
    processors = offline_processors(timer=lambda: 0.0)  # step durations too are reproducible
    clock, ids = FixedClock(), Ids()
    run, out = start_run(RunSnapshot(task.snapshot(), 1, 5), effect_of=EFFECTS.get, clock=clock, ids=ids)
    sends = of(SendStage, out)
    while sends and run is not None:
        [send] = sends
        outcome = run_stage(processors, send.stage, send.context, machine=send.machine, step_index=send.step_index)
        result = answer(send, outcome.event_type, outcome.payload)
        if passivate:
            run = TaskRun(pickle.loads(pickle.dumps(run.snapshot())), effect_of=EFFECTS.get, clock=clock, ids=ids)
        commands = run.step(Answered(result))
        out += commands
        sends = of(SendStage, commands)
    return out


@pytest.mark.parametrize("machine", ["classic", "reason_act"])
def test_a_run_restored_between_every_two_events_does_what_an_uninterrupted_one_does(machine: str) -> None:
    task = TaskFSM.create(machine, "what is 2 + 3 * 4?", task_id="t1", clock=FixedClock(), id_factory=Ids())
    steady, passivated = drive(task, passivate=False), drive(task, passivate=True)
    assert of(TaskStopped, steady)[0].state == S.COMPLETED
    assert of(TaskStopped, steady)[0].snapshot.context.final_result == "2 + 3 * 4 = 14"
    assert passivated == steady  # the same transitions, checkpoints, requests and final snapshot
