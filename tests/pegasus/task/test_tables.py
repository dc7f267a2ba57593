"""Every row of every seed table, one case each; everything else is rejected."""

from __future__ import annotations

import pytest

from pegasus.task import Event, EventType, InvalidStateTransition, Plan, PlanStep, TaskContext, machines
from tests.pegasus.task import seed_tables as seed
from tests.pegasus.conftest import fsm_at

ALL_EVENTS = [e.value for e in EventType]


def _payload_for(machine: str, event: str) -> dict:
    """A payload that passes the entry gates (lifecycle failed needs an exit_reason)."""
    if machine == "lifecycle" and event == "TASK_FAILED":
        return {"exit_reason": "exception"}
    if event == "REFLECT_DONE":
        return {"verdict": "complete"}
    return {}


def _context_for(state: str) -> TaskContext:
    # A suspended task knows where it came from; acting tasks have a plan with steps left.
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="a"), PlanStep(index=1, description="b")])
    return TaskContext(input_text="x", plan=plan, suspended_state="thinking" if state == "suspended" else None)


def _assert_moved(fsm, source: str, event: Event, target: str) -> None:
    assert fsm.transition(event) == target
    assert fsm.state == target
    last = fsm.history[-1]
    assert (last.from_state, last.to_state) == (source, target)
    assert last.trigger_event_type == event.type
    assert last.trigger_event_id == event.id


@pytest.mark.parametrize("source,event,target", seed.CLASSIC_STATIC)
def test_classic_static_row(source: str, event: str, target: str) -> None:
    """Seed 000 static table: each row moves to its target and records history."""
    fsm = fsm_at("classic", source, _context_for(source))
    _assert_moved(fsm, source, Event(type=event, id="ev-1"), target)


@pytest.mark.parametrize("source,event,target", seed.REASON_ACT_STATIC)
def test_reason_act_static_row(source: str, event: str, target: str) -> None:
    """Seed 001 static table."""
    fsm = fsm_at("reason_act", source, _context_for(source))
    _assert_moved(fsm, source, Event(type=event, id="ev-1"), target)


@pytest.mark.parametrize("point,source,target,event", seed.LIFECYCLE_POINTS)
def test_lifecycle_point(point: str, source: str, target: str, event: str) -> None:
    """Seed 002 T1-T20; T19/T20 are no-ops with no history entry."""
    fsm = fsm_at("lifecycle", source)
    ev = Event(type=event, id=f"ev-{point}", payload=_payload_for("lifecycle", event))
    if source == target:
        assert fsm.transition(ev) == source
        assert fsm.history == []
    else:
        _assert_moved(fsm, source, ev, target)


@pytest.mark.parametrize("machine,states", [("classic", seed.CLASSIC_ACTIVE), ("reason_act", seed.REASON_ACT_ACTIVE)])
def test_special_suspend_from_every_active_state(machine: str, states: list[str]) -> None:
    """TASK_SUSPENDED from any active state -> suspended, remembering the state."""
    for state in states:
        fsm = fsm_at(machine, state, _context_for(state))
        _assert_moved(fsm, state, Event(type="TASK_SUSPENDED", payload={"reason": "user"}), "suspended")
        assert fsm.context.suspended_state == state
        assert fsm.context.suspend_reason == "user"


@pytest.mark.parametrize("machine,states,terminal", [
    ("classic", seed.CLASSIC_STATES, {"completed", "failed"}),
    ("reason_act", seed.REASON_ACT_STATES, {"completed", "failed"}),
])
def test_special_fail_from_every_non_terminal_state(machine: str, states: list[str], terminal: set[str]) -> None:
    for state in states:
        if state in terminal:
            continue
        fsm = fsm_at(machine, state, _context_for(state))
        _assert_moved(fsm, state, Event(type="TASK_FAILED", payload={"error": "boom"}), "failed")
        assert fsm.context.error == "boom"


def _allowed(machine: str) -> set[tuple[str, str]]:
    if machine == "lifecycle":
        return {(s, e) for _, s, _, e in seed.LIFECYCLE_POINTS}
    static, dynamic, states, active = {
        "classic": (seed.CLASSIC_STATIC, seed.CLASSIC_DYNAMIC, seed.CLASSIC_STATES, seed.CLASSIC_ACTIVE),
        "reason_act": (seed.REASON_ACT_STATIC, seed.REASON_ACT_DYNAMIC, seed.REASON_ACT_STATES,
                       seed.REASON_ACT_ACTIVE),
    }[machine]
    allowed = {(s, e) for s, e, _ in static} | set(dynamic)
    allowed |= {(s, "TASK_SUSPENDED") for s in active}
    allowed |= {(s, "TASK_FAILED") for s in states if s not in ("completed", "failed")}
    return allowed


@pytest.mark.parametrize("machine", ["classic", "reason_act", "lifecycle"])
def test_every_pair_outside_the_tables_is_rejected(machine: str) -> None:
    """Any (state, event) not in the seed's tables raises and leaves the task untouched."""
    allowed = _allowed(machine)
    checked = 0
    for state in machines.get(machine).states:
        for event in ALL_EVENTS:
            fsm = fsm_at(machine, state, _context_for(state))
            assert fsm.can_transition(event) == ((state, event) in allowed), (state, event)
            if (state, event) in allowed:
                continue
            before = (fsm.state, fsm.history, fsm.context.model_dump(), dict(fsm.metadata))
            with pytest.raises(InvalidStateTransition) as info:
                fsm.transition(Event(type=event, payload=_payload_for(machine, event)))
            assert (info.value.state, info.value.event_type) == (state, event)
            assert (fsm.state, fsm.history, fsm.context.model_dump(), dict(fsm.metadata)) == before
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("machine,terminal", [("classic", ["completed", "failed"]),
                                              ("reason_act", ["completed", "failed"])])
def test_terminal_states_absorb_everything(machine: str, terminal: list[str]) -> None:
    for state in terminal:
        fsm = fsm_at(machine, state)
        assert fsm.is_terminal and not fsm.is_active
        for event in ALL_EVENTS:
            with pytest.raises(InvalidStateTransition):
                fsm.transition(Event(type=event))
        assert fsm.state == state and fsm.history == []


def test_lifecycle_terminal_states_accept_only_the_seed_exits() -> None:
    exits = {("failed", "TASK_RETRIED"), ("blocked", "TASK_UNBLOCKED"), ("blocked", "TASK_CANCELED")}
    for state in seed.LIFECYCLE_TERMINAL:
        fsm = fsm_at("lifecycle", state)
        assert fsm.is_terminal
        accepted = {(state, e) for e in ALL_EVENTS if fsm.can_transition(e)}
        assert accepted == {pair for pair in exits if pair[0] == state}


def test_machine_states_are_the_seeds() -> None:
    assert list(machines.get("classic").states) == seed.CLASSIC_STATES
    assert list(machines.get("reason_act").states) == seed.REASON_ACT_STATES
    assert list(machines.get("lifecycle").states) == seed.LIFECYCLE_STATES
    assert sorted(machines.get("lifecycle").terminal) == sorted(seed.LIFECYCLE_TERMINAL)
    assert sorted(machines.get("lifecycle").active) == ["queued", "running", "verifying"]
