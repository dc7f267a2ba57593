"""A broken table fails when it is built, with a message that names the problem."""

from __future__ import annotations

import pytest

from pegasus.task import MachineDefinitionError, UnknownMachineError, build_machine, machines
from pegasus.task.engine import Dynamic, Special, Static
from pegasus.task.events import EventType as E

BASE = dict(states=("a", "b", "end"), initial="a", terminal=("end",), active=("a", "b"))
GOOD_ROWS = (Static("a", E.TASK_CREATED, "b"), Static("b", E.TASK_DONE, "end"))


def test_a_good_table_builds() -> None:
    machine = build_machine("ok", rows=GOOD_ROWS, **BASE)
    assert machine.events_from("a") == [E.TASK_CREATED]


@pytest.mark.parametrize("rows,specials,message", [
    ((*GOOD_ROWS, Static("a", E.TASK_QUEUED, "nowhere")), (), "unknown state"),
    ((Static("a", E.TASK_CREATED, "end"), Static("b", E.TASK_DONE, "end")), (), "unreachable"),
    ((Static("a", E.TASK_CREATED, "b"),), (), "'b' has no exit"),
    ((*GOOD_ROWS, Static("a", E.TASK_CREATED, "end")), (), "duplicate row"),
    (GOOD_ROWS, (Special(E.TASK_FAILED, "ghost", "active"),), "unknown state"),
    (GOOD_ROWS, (Special(E.TASK_FAILED, "end", "active"), Special(E.TASK_FAILED, "end", "active")), "duplicate special"),
    ((*GOOD_ROWS, Dynamic("b", E.TASK_QUEUED, lambda c, e: "a", frozenset(), "none")), (), "no possible target"),
])
def test_broken_tables_are_refused(rows, specials, message: str) -> None:
    with pytest.raises(MachineDefinitionError, match=message):
        build_machine("broken", rows=rows, specials=specials, **BASE)


def test_bad_state_sets_are_refused() -> None:
    with pytest.raises(MachineDefinitionError, match="duplicate state"):
        build_machine("x", rows=GOOD_ROWS, **{**BASE, "states": ("a", "a", "b", "end")})
    with pytest.raises(MachineDefinitionError, match="unknown terminal"):
        build_machine("x", rows=GOOD_ROWS, **{**BASE, "terminal": ("zzz",)})
    with pytest.raises(MachineDefinitionError, match="both active and terminal"):
        build_machine("x", rows=GOOD_ROWS, **{**BASE, "active": ("a", "end")})


def test_a_guard_that_picks_an_undeclared_target_is_refused_at_run_time() -> None:
    from pegasus.task import InvalidStateTransition, TaskContext, TaskFSM
    machine = build_machine("g", rows=(Dynamic("a", E.TASK_CREATED, lambda c, e: "end", frozenset({"b"}), "to b"),
                                       Static("b", E.TASK_DONE, "end")), **BASE)
    fsm = TaskFSM(machine, task_id="t", context=TaskContext())
    with pytest.raises(InvalidStateTransition, match="guard chose 'end'"):
        fsm.transition("TASK_CREATED")


def test_unknown_machine_name() -> None:
    with pytest.raises(UnknownMachineError, match="classic, reason_act, lifecycle"):
        machines.get("nope")
