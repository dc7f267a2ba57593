"""What each state of a cognitive machine runs, and on which pool: one table, checked when built,
from which dispatch and stage routing are derived; names are constants."""

from __future__ import annotations

from typing import get_args

import pytest

from pegasus.cognitive.stages import LLM_STAGES, TOOL_STAGES, pool_for
from pegasus.task import MachineDefinitionError, Plan, PlanStep, TaskContext, TaskFSM, build_machine, machines
from pegasus.task.dispatch import RaiseEvent, RunStage, Wait, next_work
from pegasus.task.engine import Runs, Special, Static
from pegasus.task.events import EventType as E
from pegasus.task.machines import COGNITIVE_MACHINES, STAGE_POOLS, _stage_pools
from pegasus.task.names import (
    CognitiveMachineName, CognitiveState, LifecycleState, MachineName, PoolName, StageName,
)

# Seed 003's dispatch (its match statement), by hand: state -> (stage, pool).
SEED_DISPATCH = {
    "classic": {"perceiving": ("perceive", "llm"), "thinking": ("think", "llm"), "planning": ("plan", "llm"),
                "acting": ("act", "tool"), "reflecting": ("reflect", "llm")},
    "reason_act": {"reasoning": ("reason", "llm"), "acting": ("act", "tool")},
}
PLAN = Plan(goal="g", steps=[PlanStep(index=3, description="s", action_params={"tool": "echo"})])


@pytest.mark.parametrize("machine", COGNITIVE_MACHINES)
def test_each_machine_declares_its_stages_and_pools_as_the_seeds_dispatch(machine: str) -> None:
    table = machines.get(machine)
    assert {state: (runs.stage, runs.pool) for state, runs in table.stages.items()} == SEED_DISPATCH[machine]
    assert table.raises == {"idle": E.TASK_CREATED}


@pytest.mark.parametrize("machine,state", [(m, s) for m in COGNITIVE_MACHINES for s in machines.get(m).states])
def test_dispatch_reads_the_table(machine: str, state: str) -> None:
    table = machines.get(machine)
    work = next_work(machine, state, TaskContext(plan=PLAN))
    if state in SEED_DISPATCH[machine]:
        stage, pool = SEED_DISPATCH[machine][state]
        assert work == RunStage(stage, pool, 3 if stage == "act" else None)
        assert pool_for(stage) == pool
    elif state == "idle":
        assert work == RaiseEvent(E.TASK_CREATED)
    else:
        assert isinstance(work, Wait) and (state == table.suspended or state in table.terminal)


@pytest.mark.parametrize("machine,event", [("classic", E.ACT_DONE), ("reason_act", E.STEP_COMPLETED)])
def test_an_empty_plan_ends_acting_as_the_machine_declares(machine: str, event: E) -> None:
    for context in (TaskContext(), TaskContext(plan=Plan(goal="g", steps=[]))):
        assert next_work(machines.get(machine), "acting", context) == RaiseEvent(event)


def test_stage_routing_is_derived_from_the_tables() -> None:
    assert STAGE_POOLS == {"perceive": "llm", "think": "llm", "plan": "llm", "reflect": "llm", "reason": "llm",
                           "act": "tool"}
    assert set(LLM_STAGES) == {s for s, p in STAGE_POOLS.items() if p == PoolName.LLM}
    assert TOOL_STAGES == (StageName.ACT,)
    with pytest.raises(ValueError, match="unknown stage 'dream'"):
        pool_for("dream")


# -- the table is checked when it is built -----------------------------------------------------

BASE = dict(states=("idle", "busy", "waiting", "done"), initial="idle", terminal=("done",), active=("busy",),
            suspended="waiting", specials=(Special(E.TASK_SUSPENDED, "waiting", "active"),),
            rows=(Static("idle", E.TASK_CREATED, "busy"), Static("busy", E.ACT_DONE, "done"),
                  Static("waiting", E.TASK_RESUMED, "busy")))
GOOD = dict(raises={"idle": E.TASK_CREATED}, stages={"busy": Runs("act", "tool", empty_plan=E.ACT_DONE)})


def test_a_good_work_table_builds() -> None:
    assert build_machine("ok", **BASE, **GOOD).stages["busy"] == Runs("act", "tool", E.ACT_DONE)


@pytest.mark.parametrize("work,message", [
    ({"raises": {"idle": E.TASK_CREATED}, "stages": {}}, "active state 'busy' has no stage"),
    ({"raises": {}, "stages": GOOD["stages"]}, "state 'idle' neither runs a stage nor raises an event"),
    ({**GOOD, "raises": {"idle": E.TASK_DONE}}, "raises TASK_DONE, which it does not accept"),
    ({**GOOD, "stages": {"busy": Runs("act", "tool", empty_plan=E.STEP_COMPLETED)}}, "raises STEP_COMPLETED"),
    ({**GOOD, "stages": {**GOOD["stages"], "done": Runs("x", "llm")}}, "'done' cannot run a stage"),
    ({**GOOD, "stages": {**GOOD["stages"], "waiting": Runs("x", "llm")}}, "'waiting' cannot run a stage"),
    ({**GOOD, "stages": {**GOOD["stages"], "nowhere": Runs("x", "llm")}}, "'nowhere' cannot run a stage"),
    ({**GOOD, "raises": {"idle": E.TASK_CREATED, "busy": E.ACT_DONE}}, "both runs a stage and raises"),
])
def test_a_broken_work_table_fails_when_built(work: dict, message: str) -> None:
    with pytest.raises(MachineDefinitionError, match=message):
        build_machine("broken", **BASE, **work)


def test_a_stage_on_two_pools_fails_when_built() -> None:
    one = build_machine("one", **BASE, **GOOD)
    two = build_machine("two", **BASE, raises=GOOD["raises"], stages={"busy": Runs("act", "llm", E.ACT_DONE)})
    with pytest.raises(MachineDefinitionError, match="stage 'act' of state 'busy' runs on 'llm', elsewhere on 'tool'"):
        _stage_pools((one, two))


# -- names ---------------------------------------------------------------------------------------


def test_every_machine_state_and_name_has_its_constant() -> None:
    assert set(machines.names()) == set(MachineName)
    assert set(get_args(CognitiveMachineName)) == set(COGNITIVE_MACHINES)
    for name in COGNITIVE_MACHINES:
        assert set(machines.get(name).states) <= set(CognitiveState)
    assert set(machines.get(MachineName.LIFECYCLE).states) == set(LifecycleState)
    # the supervisor's own: gates, the post-task reflector, and embedding vectors (issue 29)
    assert set(STAGE_POOLS) | {StageName.GATE, StageName.POST_REFLECT, StageName.EMBED_QUERY,
                               StageName.EMBED_ROWS} == set(StageName)
    # memory: no stage's own pool; the act steps calling a memory tool go there (pegasus.run.core)
    assert set(STAGE_POOLS.values()) | {PoolName.MEMORY} == set(PoolName)


def test_a_machine_holds_plain_strings_that_equal_the_constants() -> None:
    task = TaskFSM.create(MachineName.REASON_ACT, "x")
    task.transition("TASK_CREATED")
    assert task.state == CognitiveState.REASONING and type(task.state) is str
    assert type(task.snapshot().machine) is str and task.snapshot().machine == MachineName.REASON_ACT
    assert repr(StageName.ACT) == "'act'"  # reads as the string it stands for (in errors and logs)
