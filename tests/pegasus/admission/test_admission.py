"""Admission (the supervisor's lifecycle view), without any actor system."""

from __future__ import annotations

import itertools

import pytest

from pegasus.admission import Admission, TransitionNotice, RunGate, StartRun, StopRun, SuspendRun, WakeAfter
from pegasus.config import Settings
from pegasus.task import InvalidStateTransition, RetryNotAllowedError, TaskFSM, TaskNotFoundError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(**overrides) -> tuple[Admission, Clock]:
    clock = Clock()
    counter = itertools.count(1)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    return Admission(settings, clock=clock, id_factory=lambda: f"t{next(counter)}"), clock


def starts(effects) -> list[str]:
    return [e.task_id for e in effects if isinstance(e, StartRun)]


def lifecycle_path(effects, task_id: str) -> list[str]:
    return [e.to_state for e in effects if isinstance(e, TransitionNotice) and e.machine == "lifecycle" and e.task_id == task_id]


def finish(admission: Admission, task_id: str, state: str = "completed", exit_reason: str | None = None):
    record = admission.get(task_id)
    fsm = TaskFSM.restore(record.snapshot)
    fsm.transition("TASK_CREATED")
    if state == "completed":
        fsm.transition("PERCEIVE_DONE"); fsm.transition("THINK_DONE"); fsm.transition("PLAN_DONE")
        fsm.transition("ACT_DONE"); fsm.transition("REFLECT_DONE", verdict="complete", final_result="ok")
    elif state == "failed":
        fsm.transition("TASK_FAILED", error="boom")
    elif state == "suspended":
        fsm.transition("PERCEIVE_DONE"); fsm.transition("NEED_MORE_INFO", question="which?")
    return admission.on_stopped(task_id, record.run, fsm.state, fsm.snapshot(), exit_reason)


def test_auto_approval_runs_at_once_up_to_the_cap_then_queues() -> None:
    admission, _ = make(runtime={"max_active_tasks": 2})
    effects = []
    for n in range(4):
        effects += admission.submit(f"job {n}", "classic", 5, {}, "test")[1]
    assert starts(effects) == ["t1", "t2"]
    assert lifecycle_path(effects, "t1") == ["draft", "approved", "queued", "running"]
    assert admission.queue_length() == 2 and admission.running == {"t1", "t2"}
    more = finish(admission, "t1")
    assert lifecycle_path(more, "t1") == ["verifying", "verified", "done"]
    assert starts(more) == ["t3"]


def test_priority_order_lower_first_fifo_within_a_priority() -> None:
    admission, _ = make(runtime={"max_active_tasks": 1})
    admission.submit("blocker", "classic", 5, {}, "t")
    for text, priority in (("low", 9), ("high-a", 1), ("mid", 5), ("high-b", 1)):
        admission.submit(text, "classic", priority, {}, "t")
    order = []
    running = "t1"
    for _ in range(4):
        started = starts(finish(admission, running))
        running = started[0]
        order.append(admission.get(running).snapshot.context.input_text)
    assert order == ["high-a", "high-b", "mid", "low"]


def test_manual_approval_waits_in_draft() -> None:
    admission, _ = make(runtime={"approval_policy": "manual"})
    record, effects = admission.submit("x", "classic", 5, {}, "t")
    assert record.state == "draft" and starts(effects) == []
    assert starts(admission.approve("t1")) == ["t1"]
    with pytest.raises(InvalidStateTransition, match="only a draft"):
        admission.approve("t1")


def test_cancel_a_running_task_stops_its_run_and_frees_the_slot() -> None:
    admission, _ = make(runtime={"max_active_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    effects = admission.cancel("t1", "user")
    assert StopRun("t1", 1) in effects and starts(effects) == ["t2"]
    assert admission.get("t1").state == "canceled"
    assert admission.get("t1").lifecycle.metadata["cleanup_summary"]["canceled_from"] == "running"
    # The canceled run's late report changes nothing.
    assert finish(admission, "t1") == []
    with pytest.raises(InvalidStateTransition):
        admission.cancel("t1", "again")


def test_cancel_a_queued_task_removes_it_from_the_queue() -> None:
    admission, _ = make(runtime={"max_active_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    admission.cancel("t2", "user")
    assert admission.queue_length() == 0 and starts(finish(admission, "t1")) == []


def test_suspend_blocks_and_frees_the_slot_resume_queues_again_with_the_message() -> None:
    admission, _ = make(runtime={"max_active_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    assert admission.suspend("t1", "hold") == [SuspendRun("t1", 1, "hold")]
    effects = finish(admission, "t1", "suspended")
    assert admission.get("t1").state == "blocked" and starts(effects) == ["t2"]
    effects = admission.resume("t1", "README.md")
    assert admission.get("t1").state == "queued" and starts(effects) == []
    start = [e for e in finish(admission, "t2") if isinstance(e, StartRun)][0]
    assert (start.task_id, start.run, start.resume_event, start.resume_payload) == \
        ("t1", 2, "MESSAGE_RECEIVED", {"text": "README.md"})


def test_resume_and_suspend_refuse_wrong_states() -> None:
    admission, _ = make()
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1")
    with pytest.raises(InvalidStateTransition, match="only a suspended task"):
        admission.resume("t1", None)
    with pytest.raises(InvalidStateTransition, match="only a running task"):
        admission.suspend("t1", "x")
    with pytest.raises(TaskNotFoundError):
        admission.get("nope")


def test_retry_is_bounded_and_backs_off() -> None:
    admission, clock = make(retry={"max_attempts": 2, "backoff_s": 1.5})
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1", "failed", "exception")
    record = admission.get("t1")
    assert (record.state, record.exit_reason) == ("failed", "exception")
    effects = admission.retry("t1")
    assert WakeAfter(1.5, "t1") in effects and starts(effects) == []
    assert admission.wake("t1") == []  # not due yet
    clock.now += 1.5
    assert starts(admission.wake("t1")) == ["t1"]
    assert admission.get("t1").snapshot.state == "idle"  # a fresh cognitive run
    finish(admission, "t1", "failed", "exception")
    with pytest.raises(RetryNotAllowedError, match="2 of 2"):
        admission.retry("t1")


def test_gates_pass_in_order_then_done() -> None:
    gates = [{"name": "one", "command": ["true"]}, {"name": "two", "command": ["true"]}]
    admission, _ = make(verification={"gates": gates})
    admission.submit("a", "classic", 5, {}, "t")
    effects = finish(admission, "t1")
    gate = [e for e in effects if isinstance(e, RunGate)][0]
    assert gate.gate.name == "one" and admission.get("t1").state == "verifying"
    gate2 = [e for e in admission.on_gate("t1", gate.token, True, {}) if isinstance(e, RunGate)][0]
    assert gate2.gate.name == "two"
    assert admission.on_gate("t1", gate.token, True, {}) == []  # stale token ignored
    assert lifecycle_path(admission.on_gate("t1", gate2.token, True, {}), "t1") == ["verified", "done"]


def test_a_failing_gate_requeues_once_then_fails_with_gate_failed() -> None:
    admission, _ = make(verification={"gates": [{"name": "g", "command": ["false"]}], "max_gate_retries": 1})
    admission.submit("a", "classic", 5, {}, "t")
    gate = [e for e in finish(admission, "t1") if isinstance(e, RunGate)][0]
    effects = admission.on_gate("t1", gate.token, False, {"error": "exit 1"})
    assert lifecycle_path(effects, "t1") == ["queued", "running"] and starts(effects) == ["t1"]
    assert admission.get("t1").snapshot.context.messages[-1]["content"].startswith("verification gate failed")
    gate = [e for e in finish(admission, "t1") if isinstance(e, RunGate)][0]
    admission.on_gate("t1", gate.token, False, {"error": "exit 1"})
    record = admission.get("t1")
    assert (record.state, record.exit_reason) == ("failed", "gate_failed")


def test_pending_limit_refuses_new_tasks() -> None:
    admission, _ = make(runtime={"max_active_tasks": 1, "max_pending_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    with pytest.raises(InvalidStateTransition, match="limit is 1"):
        admission.submit("c", "classic", 5, {}, "t")


def test_a_lost_run_restarts_then_fails_after_the_restart_limit() -> None:
    from pegasus.admission import MAX_RESTARTS
    admission, _ = make()
    admission.submit("a", "classic", 5, {}, "t")
    for run in range(1, MAX_RESTARTS + 1):
        [ended, restart] = admission.on_run_lost("t1", run, "actor died")
        assert (ended.run, ended.outcome, ended.failed) == (run, "died", "actor died")  # its span, sent once
        assert isinstance(restart, StartRun) and restart.run == run + 1
        assert admission.get("t1").state == "running"
    assert admission.on_run_lost("t1", 1, "stale report") == []  # an old run's loss changes nothing
    admission.on_run_lost("t1", MAX_RESTARTS + 1, "actor died")
    record = admission.get("t1")
    assert (record.state, record.exit_reason) == ("failed", "exception")
    assert "gave up after 3 restarts" in record.error


def test_usage_total_sums_the_stages_that_report_usage() -> None:
    from pegasus.views import usage_total
    stages = [{"stage": "think", "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "calls": 1}},
              {"stage": "act"},
              {"stage": "plan", "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "calls": 2}}]
    assert usage_total(stages) == {"prompt_tokens": 17, "completion_tokens": 8, "total_tokens": 25, "calls": 3}
