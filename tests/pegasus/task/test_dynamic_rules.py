"""The seeds' dynamic rules and lifecycle's state-entry gates."""

from __future__ import annotations

import pytest

from pegasus.task import (
    Event, InvalidStateTransition, Plan, PlanStep, StateEntryGateError, TaskContext, TaskFSM,
)
from tests.pegasus.conftest import fsm_at


def _plan(*types: str) -> dict:
    return Plan(goal="g", steps=[PlanStep(index=i, description=t, action_type=t) for i, t in enumerate(types)]).model_dump()


def _result(index: int, success: bool = True) -> dict:
    return {"step_index": index, "success": success, "output": f"out{index}"}


def test_classic_acting_loops_while_steps_remain_then_reflects() -> None:
    """ACTING + TOOL_CALL_COMPLETED/FAILED: more steps -> acting, else reflecting."""
    fsm = fsm_at("classic", "planning")
    fsm.transition("PLAN_DONE", plan=_plan("tool_call", "tool_call", "respond"))
    assert fsm.transition("TOOL_CALL_COMPLETED", result=_result(0)) == "acting"
    assert fsm.transition("TOOL_CALL_FAILED", result=_result(1, success=False)) == "acting"
    assert fsm.transition("TOOL_CALL_COMPLETED", result=_result(2)) == "reflecting"
    assert [a.success for a in fsm.context.actions_done] == [True, False, True]
    assert fsm.context.plan is not None and not fsm.context.plan.has_more_steps


@pytest.mark.parametrize("verdict,target", [("complete", "completed"), ("continue", "thinking"), ("replan", "planning")])
def test_classic_reflect_routes_by_verdict(verdict: str, target: str) -> None:
    fsm = fsm_at("classic", "reflecting")
    reflection = {"verdict": verdict, "assessment": "a", "lessons": ["l"]}
    assert fsm.transition("REFLECT_DONE", reflection=reflection) == target
    assert fsm.context.reflections[-1].verdict == verdict
    assert fsm.context.iteration == (0 if verdict == "complete" else 1)


def test_classic_reflect_reads_the_last_reflection_when_the_payload_has_no_verdict() -> None:
    ctx = TaskContext(reflections=[{"verdict": "replan"}])
    assert fsm_at("classic", "reflecting", ctx).transition("REFLECT_DONE") == "planning"


def test_classic_reflect_with_unknown_verdict_is_rejected_untouched() -> None:
    fsm = fsm_at("classic", "reflecting")
    with pytest.raises(InvalidStateTransition):
        fsm.transition("REFLECT_DONE", verdict="maybe")
    with pytest.raises(InvalidStateTransition):
        fsm.transition("REFLECT_DONE")  # no verdict anywhere
    assert fsm.state == "reflecting" and fsm.history == [] and fsm.context.reflections == []


@pytest.mark.parametrize("machine,state", [("classic", "perceiving"), ("classic", "acting"),
                                           ("classic", "reflecting"), ("reason_act", "acting"),
                                           ("reason_act", "reasoning")])
def test_resume_restores_the_pre_suspend_state(machine: str, state: str) -> None:
    fsm = fsm_at(machine, state)
    fsm.transition("TASK_SUSPENDED", reason="lunch")
    assert fsm.state == "suspended" and fsm.context.suspended_state == state
    assert fsm.transition("TASK_RESUMED", message="back") == state
    assert fsm.context.suspended_state is None and fsm.context.suspend_reason is None
    assert fsm.context.messages[-1] == {"role": "user", "content": "back"}


def test_need_more_info_then_message_goes_back_to_thinking() -> None:
    fsm = fsm_at("classic", "thinking")
    fsm.transition("NEED_MORE_INFO", question="which file?", reasoning={"why": "vague"})
    assert fsm.state == "suspended" and fsm.context.suspend_reason == "which file?"
    assert fsm.transition("MESSAGE_RECEIVED", text="README.md") == "thinking"
    assert fsm.context.messages == [{"role": "user", "content": "README.md"}]


def test_resume_without_a_remembered_state_is_rejected() -> None:
    fsm = fsm_at("classic", "suspended")
    with pytest.raises(InvalidStateTransition):
        fsm.transition("TASK_RESUMED")
    assert fsm.state == "suspended"


@pytest.mark.parametrize("types,target", [
    (("tool_call", "respond"), "reasoning"),   # a tool_call step -> back to reasoning
    (("respond",), "completed"),                # only respond steps -> completed
    ((), "completed"),
])
def test_reason_act_completion_routing_by_step_types(types: tuple[str, ...], target: str) -> None:
    fsm = fsm_at("reason_act", "reasoning")
    fsm.transition("REASON_DONE", plan=_plan(*types), reasoning={"r": 1})
    assert fsm.state == "acting"
    state = fsm.state
    for index, kind in enumerate(types):
        event = "TOOL_CALL_COMPLETED" if kind == "tool_call" else "STEP_COMPLETED"
        state = fsm.transition(event, result=_result(index))
    if not types:
        state = fsm.transition("STEP_COMPLETED")
    assert state == target


def test_a_bad_payload_is_rejected_untouched() -> None:
    fsm = fsm_at("classic", "planning")
    with pytest.raises(InvalidStateTransition, match="bad payload"):
        fsm.transition("PLAN_DONE", plan={"steps": "not a list"})
    assert fsm.state == "planning" and fsm.context.plan is None


def test_event_for_another_task_is_rejected() -> None:
    fsm = fsm_at("classic", "idle")
    with pytest.raises(InvalidStateTransition, match="another|not task-1|is for task"):
        fsm.transition(Event(type="TASK_CREATED", task_id="someone-else"))


# -- lifecycle gates (seed 002 §4.2) ------------------------------------------------


@pytest.mark.parametrize("state", ["running", "verifying"])
def test_entering_failed_needs_a_listed_exit_reason(state: str) -> None:
    fsm = fsm_at("lifecycle", state)
    for payload in ({}, {"exit_reason": "bored"}):
        with pytest.raises(StateEntryGateError, match="exit_reason"):
            fsm.transition("TASK_FAILED", **payload)
        assert fsm.state == state and fsm.history == [] and "exit_reason" not in fsm.metadata
    assert fsm.transition("TASK_FAILED", exit_reason="timeout") == "failed"
    assert fsm.metadata["exit_reason"] == "timeout"


def test_entering_canceled_fills_a_cleanup_summary_when_missing() -> None:
    fsm = fsm_at("lifecycle", "queued")
    fsm.transition("TASK_CANCELED")
    assert fsm.metadata["cleanup_summary"]["auto"] is True
    assert fsm.metadata["cleanup_summary"]["canceled_from"] == "queued"
    given = fsm_at("lifecycle", "draft")
    given.transition("TASK_CANCELED", cleanup_summary={"released": ["slot"]})
    assert given.metadata["cleanup_summary"] == {"released": ["slot"]}


def test_entering_done_checks_the_audit_count_in_warning_mode() -> None:
    """A full run has enough audits; a task restored with no history still reaches done, warned."""
    fsm = TaskFSM.create("lifecycle", "x")
    for event in ("TASK_APPROVED", "TASK_QUEUED", "TASK_STARTED", "EXECUTION_COMPLETED",
                  "TASK_VERIFIED", "TASK_DONE"):
        fsm.transition(event)
    assert fsm.state == "done" and "warnings" not in fsm.metadata
    bare = fsm_at("lifecycle", "verified")
    assert bare.transition("TASK_DONE") == "done"
    assert bare.metadata["warnings"] == ["done with 1 audit event(s); at least 2 expected"]


def test_retry_and_unblock_leave_the_terminal_states() -> None:
    fsm = fsm_at("lifecycle", "running")
    fsm.transition("TASK_FAILED", exit_reason="exception")
    assert fsm.transition("TASK_RETRIED") == "queued"
    fsm.transition("TASK_STARTED")
    fsm.transition("TASK_BLOCKED")
    assert fsm.transition("TASK_UNBLOCKED") == "queued"
