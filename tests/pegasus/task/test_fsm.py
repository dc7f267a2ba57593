"""TaskFSM construction, queries, snapshots, and reproducible histories."""

from __future__ import annotations

import pytest

from pegasus.task import Event, EventType, InvalidStateTransition, TaskFSM
from tests.pegasus.conftest import FixedClock, Ids


def test_create_starts_in_the_initial_state_with_the_input() -> None:
    fsm = TaskFSM.create(machine="classic", input_text="count words", priority=2, team="a",
                         clock=FixedClock(), id_factory=Ids("t"))
    assert (fsm.task_id, fsm.state, fsm.priority) == ("t-1", "idle", 2)
    assert fsm.context.input_text == "count words" and fsm.metadata == {"team": "a"}
    assert not fsm.is_terminal and not fsm.is_active and fsm.history == []
    assert fsm.can_transition(EventType.TASK_CREATED) and not fsm.can_transition("PLAN_DONE")


@pytest.mark.parametrize("kind,source", [("MESSAGE_RECEIVED", "message"), ("WEBHOOK_TRIGGERED", "webhook"),
                                         ("SCHEDULE_FIRED", "schedule")])
def test_from_event_takes_text_source_and_metadata(kind: str, source: str) -> None:
    event = Event(type=kind, task_id="abc", payload={"text": "hi", "metadata": {"k": 1}, "priority": 1})
    fsm = TaskFSM.from_event(event, machine="reason_act")
    assert (fsm.task_id, fsm.machine.name, fsm.priority) == ("abc", "reason_act", 1)
    assert (fsm.context.input_text, fsm.context.source, fsm.metadata) == ("hi", source, {"k": 1})


def test_from_event_refuses_non_input_events() -> None:
    with pytest.raises(InvalidStateTransition, match="external input"):
        TaskFSM.from_event(Event(type="PLAN_DONE"))


def test_snapshot_and_restore_give_the_same_task() -> None:
    fsm = TaskFSM.create("classic", "x", clock=FixedClock(), id_factory=Ids())
    fsm.transition("TASK_CREATED")
    fsm.transition("PERCEIVE_DONE", perception={"intent": "x"})
    copy = TaskFSM.restore(fsm.snapshot())
    assert copy.snapshot() == fsm.snapshot()
    copy.transition("TASK_FAILED", error="e")
    assert fsm.state == "thinking"  # the copy is independent


def test_history_is_a_copy() -> None:
    fsm = TaskFSM.create("classic", "x")
    fsm.transition("TASK_CREATED")
    fsm.history.clear()
    assert len(fsm.history) == 1


def test_same_clock_and_ids_give_identical_histories() -> None:
    def run() -> list:
        fsm = TaskFSM.create("classic", "x", clock=FixedClock(), id_factory=Ids())
        for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE"):
            fsm.transition(event)
        return [h.model_dump() for h in fsm.history]
    assert run() == run()


def test_deep_copy_of_a_context_is_independent_and_equal_to_pydantics() -> None:
    from pydantic import ValidationError

    from pegasus.task.models import ActionResult, Plan, PlanStep, TaskContext, deep_copy

    shared = [1, 2]
    context = TaskContext(
        input_text="x", input_metadata={"tags": ["a"], "nested": {"n": 1}},
        plan=Plan(goal="g", steps=[PlanStep(index=0, description="d", action_params={"args": {"k": [1]}})]),
        actions_done=[ActionResult(step_index=0, success=True, output=(shared, {3}))],
        final_result={"answer": shared})
    copied = deep_copy(context)
    assert copied == context == context.model_copy(deep=True)
    assert copied.model_dump(exclude_unset=True) == context.model_dump(exclude_unset=True)  # fields set kept
    copied.plan.steps[0].action_params["args"]["k"].append(2)
    copied.plan.mark_done(0)
    copied.input_metadata["tags"].append("b")
    copied.actions_done[0].output[0].append(3)  # a list inside a tuple (the deepcopy fallback)
    copied.final_result["answer"].append(4)
    assert context.plan.steps[0].action_params == {"args": {"k": [1]}} and not context.plan.steps[0].completed
    assert context.input_metadata["tags"] == ["a"] and shared == [1, 2]
    with pytest.raises(ValidationError):  # still a validating model
        copied.iteration = "many"  # type: ignore[assignment]


def test_a_refused_transition_leaves_the_context_untouched() -> None:
    fsm = TaskFSM.create(machine="classic", input_text="what is 1 + 1?")
    before = fsm.context.model_dump()
    with pytest.raises(InvalidStateTransition):
        fsm.transition(Event(type=EventType.PERCEIVE_DONE, payload={"perception": "not a dict"}))
    assert fsm.context.model_dump() == before
