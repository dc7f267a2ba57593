"""Property tests (hypothesis): machines stay in their states, replay reproduces a
task, every model survives a msgpack round trip."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given, settings, strategies as st

from pegasus import codec
from pegasus.task import (
    ActionResult, Event, EventType, InvalidStateTransition, Plan, PlanStep, PostTaskReflection,
    Reflection, StateTransition, TaskContext, TaskFSM, TaskSnapshot, machines,
)
from tests.pegasus.conftest import FixedClock, Ids

text = st.text(max_size=20)
json_scalars = st.none() | st.booleans() | st.integers(-10**9, 10**9) | text
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(text, inner, max_size=3), max_leaves=8)
action_types = st.sampled_from(["tool_call", "generate", "sub_task", "respond"])
steps = st.lists(st.builds(PlanStep, index=st.integers(0, 50), description=text, action_type=action_types,
                           action_params=st.dictionaries(text, json_values, max_size=3),
                           completed=st.booleans()), max_size=4)
plans = st.builds(Plan, goal=text, steps=steps, reasoning=text)
reflections = st.builds(Reflection, verdict=st.sampled_from(["complete", "continue", "replan"]), assessment=text,
                        lessons=st.lists(text, max_size=3), next_focus=st.none() | text)
results = st.builds(ActionResult, step_index=st.integers(0, 50), action_type=action_types, tool=st.none() | text,
                    success=st.booleans(), output=json_values, error=st.none() | text,
                    duration_ms=st.floats(0, 1e6, allow_nan=False))
times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))
contexts = st.builds(TaskContext, input_text=text, input_metadata=st.dictionaries(text, json_values, max_size=3),
                     source=text, perception=st.none() | st.dictionaries(text, json_values, max_size=3),
                     plan=st.none() | plans, actions_done=st.lists(results, max_size=3),
                     reflections=st.lists(reflections, max_size=3), iteration=st.integers(0, 100),
                     final_result=json_values, error=st.none() | text,
                     messages=st.lists(st.dictionaries(text, text, max_size=2), max_size=3))
transitions = st.builds(StateTransition, from_state=text, to_state=text, trigger_event_type=text,
                        trigger_event_id=text, timestamp=times)
events = st.builds(Event, type=st.sampled_from(list(EventType)), task_id=st.none() | text,
                   payload=st.dictionaries(text, json_values, max_size=3), id=text, timestamp=times,
                   parent_event_id=st.none() | text)
post = st.builds(PostTaskReflection, facts=st.lists(st.builds(dict, path=text, content=text), max_size=2),
                 assessment=text)
snapshots = st.builds(TaskSnapshot, machine=st.sampled_from(machines.names()), task_id=text, state=text,
                      context=contexts, history=st.lists(transitions, max_size=3), priority=st.integers(0, 99),
                      metadata=st.dictionaries(text, json_values, max_size=3), created_at=times, updated_at=times)


@settings(max_examples=60, deadline=None)
@given(record=st.one_of(plans, reflections, results, contexts, transitions, events, post, snapshots,
                        steps.map(lambda s: s[0] if s else PlanStep(index=0, description="d"))))
def test_every_model_survives_a_msgpack_round_trip(record) -> None:
    assert codec.decode(codec.encode(record)) == record


# -- random event sequences -----------------------------------------------------------

def _payloads(event: EventType) -> st.SearchStrategy[dict]:
    """Payloads the runtime would send, plus junk, for each event type."""
    specific = {
        EventType.PLAN_DONE: st.builds(lambda p: {"plan": p.model_dump()}, plans),
        EventType.REASON_DONE: st.builds(lambda p: {"plan": p.model_dump()}, plans),
        EventType.REFLECT_DONE: st.builds(lambda v: {"verdict": v}, st.sampled_from(["complete", "continue", "replan", "?"])),
        EventType.TASK_FAILED: st.builds(lambda r: {"exit_reason": r}, st.sampled_from(["timeout", "exception", "nope"])),
        EventType.TOOL_CALL_COMPLETED: st.builds(lambda i: {"result": {"step_index": i, "success": True}}, st.integers(0, 4)),
        EventType.TOOL_CALL_FAILED: st.builds(lambda i: {"result": {"step_index": i, "success": False}}, st.integers(0, 4)),
        EventType.STEP_COMPLETED: st.builds(lambda i: {"result": {"step_index": i, "success": True}}, st.integers(0, 4)),
    }.get(event)
    return st.just({}) if specific is None else specific | st.just({})


event_sequences = st.lists(st.sampled_from(list(EventType)).flatmap(
    lambda e: _payloads(e).map(lambda p: (e, p))), max_size=40)


@settings(max_examples=150, deadline=None)
@given(machine=st.sampled_from(machines.names()), sequence=event_sequences)
def test_random_events_never_leave_the_machine_and_replay_reproduces_the_task(machine, sequence) -> None:
    fsm = TaskFSM.create(machine, "input", task_id="t", clock=FixedClock(), id_factory=Ids())
    applied: list[Event] = []
    for n, (event_type, payload) in enumerate(sequence):
        event = Event(type=event_type, payload=payload, id=f"e{n}")
        before = fsm.snapshot()
        try:
            fsm.transition(event)
            applied.append(event)
        except InvalidStateTransition:
            assert fsm.snapshot() == before  # a refused event changes nothing
        assert fsm.state in fsm.machine.states
    chain = fsm.history
    for earlier, later in zip(chain, chain[1:]):
        assert earlier.to_state == later.from_state
    replayed = TaskFSM.create(machine, "input", task_id="t", clock=FixedClock(), id_factory=Ids())
    for event in applied:
        replayed.transition(event)
    assert replayed.snapshot() == fsm.snapshot()
