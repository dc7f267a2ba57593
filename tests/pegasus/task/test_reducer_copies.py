"""A transition copies only the context fields its reducer changes in place (issue 33: the FSM deep-copied the
whole context for every reducer, ~10% of a task actor's handler CPU); the context before is never changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from pegasus.task import TaskContext
from pegasus.task.engine import InPlace
from pegasus.task.events import Event
from pegasus.task.machines import COGNITIVE_REDUCERS
from pegasus.task.models import ActionResult, Plan, PlanStep, Recall, Reflection, copied_fields
from tests.pegasus.conftest import fsm_at


def rich_context() -> TaskContext:
    """A context with every field a reducer reads or changes set, nested values included."""
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="a", action_params={"tool": "echo", "args": {"x": [1]}}),
                                 PlanStep(index=1, description="b")])
    return TaskContext(input_text="x", perception={"intent": "add", "entities": {"n": [1, 2]}},
                       reasoning={"done_before": {"id": "e"}}, plan=plan,
                       actions_done=[ActionResult(step_index=0, success=True, output={"v": [3]})],
                       reflections=[Reflection(verdict="continue", lessons=["l"])],
                       recall=Recall(identity="I am.", memories=[]), final_result={"answer": [4]},
                       messages=[{"role": "user", "content": "hi"}], messages_taken=1)


VALUES = st.recursive(st.none() | st.integers(-3, 3) | st.text(max_size=4),
                      lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
                      max_leaves=4)
PAYLOADS = st.fixed_dictionaries({}, optional={
    "perception": st.dictionaries(st.text(max_size=3), VALUES, max_size=2),
    "reasoning": st.dictionaries(st.text(max_size=3), VALUES, max_size=2),
    "plan": st.just({"goal": "h", "steps": [{"index": 0, "description": "c"}]}),
    "result": st.builds(lambda index, ok, out: {"step_index": index, "success": ok, "output": out},
                        st.integers(0, 2), st.booleans(), VALUES),
    "reflection": st.sampled_from([{"verdict": "complete"}, {"verdict": "continue", "lessons": ["m"]}]),
    "final_result": VALUES, "messages": st.lists(st.text(max_size=3), max_size=2), "through": st.integers(0, 3),
    "reason": st.text(max_size=3), "error": st.text(max_size=3), "question": st.text(max_size=3)})


@settings(max_examples=300, deadline=None)
@given(event=st.sampled_from(sorted(COGNITIVE_REDUCERS)), payload=PAYLOADS)
def test_each_cognitive_reducer_changes_in_place_only_the_fields_it_names(event: str, payload: dict[str, Any]) -> None:
    """What every reducer declares is what it may change in place: run on ``copied_fields``, the context
    it was copied from is left exactly as it was, whatever the payload (a refused one too)."""
    reducer = COGNITIVE_REDUCERS[event]
    assert isinstance(reducer, InPlace)
    before = rich_context()
    kept = before.model_dump()
    try:
        reducer(copied_fields(before, reducer.fields), Event(type=event, payload=payload))
    except (ValueError, TypeError):  # a payload the reducer refuses: the FSM refuses the event
        pass
    assert before.model_dump() == kept


def test_a_step_transition_copies_the_plan_and_the_actions_and_shares_the_rest() -> None:
    fsm = fsm_at("classic", "acting", rich_context())
    before = fsm.context
    kept = before.model_dump()
    fsm.transition(Event(type="TOOL_CALL_COMPLETED", payload={"result": {"step_index": 1, "success": True}}))
    after = fsm.context
    assert after.plan is not before.plan and after.actions_done is not before.actions_done
    assert after.plan.steps[1].completed and not before.plan.steps[1].completed and len(after.actions_done) == 2
    assert (after.perception, after.reasoning, after.recall, after.messages, after.reflections) == \
        (before.perception, before.reasoning, before.recall, before.messages, before.reflections)
    assert all(getattr(after, name) is getattr(before, name)
               for name in ("perception", "reasoning", "recall", "messages", "reflections", "final_result"))
    assert before.model_dump() == kept
