"""One table-driven engine for every task state machine.

A machine is data: states, terminal and active subsets, static rows (source, event) -> target,
dynamic ones -> guard -> target, and special rows (an event allowed from every active or
non-terminal state); a cognitive machine also says what each state does when entered.
``build_machine`` validates the table at import (MachineDefinitionError).  ``Machine.resolve`` is
the whole step function: a state, the context and an event in, the target state out (or
InvalidStateTransition); no I/O, no mutation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pegasus.task.errors import InvalidStateTransition, MachineDefinitionError
from pegasus.task.events import Event, EventType
from pegasus.task.models import TaskContext

Guard = Callable[[TaskContext, Event], str]
"""Picks the target of a dynamic row from the context and the event."""

Reducer = Callable[[TaskContext, Event], None]
"""Folds an event's payload into a (copied) context before guards run."""


@dataclass(frozen=True)
class InPlace:
    """A reducer that changes in place only the context fields it names, and may assign any field: the FSM
    copies those for it and shares the rest (a reducer that is not one gets a deep copy of the whole context)."""

    reduce: Reducer
    fields: frozenset[str]

    def __call__(self, context: TaskContext, event: Event) -> None:
        self.reduce(context, event)


@dataclass(frozen=True)
class EntryGate:
    """Checked when a state is entered (seed 002's state-entry gates).

    ``check(from_state, event, metadata, audit_count)`` returns metadata updates
    to apply with the transition, or raises StateEntryGateError to refuse it.
    """

    check: Callable[[str, Event, Mapping[str, Any], int], dict[str, Any]]
    description: str


@dataclass(frozen=True)
class Static:
    source: str
    event: EventType
    target: str


@dataclass(frozen=True)
class Dynamic:
    source: str
    event: EventType
    guard: Guard
    targets: frozenset[str]
    description: str


@dataclass(frozen=True)
class Special:
    event: EventType
    target: str
    sources: Literal["active", "non_terminal"]


Row = Static | Dynamic


@dataclass(frozen=True)
class Runs:
    """What a state does when entered: run ``stage`` on ``pool``.

    ``empty_plan`` set: the stage runs the plan's steps, one request per step,
    and this event ends the state when no step is left.
    """

    stage: str
    pool: str
    empty_plan: EventType | None = None


@dataclass(frozen=True)
class Machine:
    """A validated state machine.  Build it with ``build_machine``."""

    name: str
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    active: frozenset[str]
    rows: Mapping[tuple[str, EventType], Row]
    specials: Mapping[EventType, Special]
    reducers: Mapping[EventType, Reducer] = field(default_factory=dict)
    entry_gates: Mapping[str, EntryGate] = field(default_factory=dict)
    suspended: str | None = None
    same_state_is_noop: bool = False
    description: str = ""
    stages: Mapping[str, Runs] = field(default_factory=dict)
    raises: Mapping[str, EventType] = field(default_factory=dict)

    # -- queries -----------------------------------------------------------------
    def row_for(self, state: str, event_type: EventType) -> Row | Special | None:
        """The row that handles ``event_type`` in ``state``, or None.

        Explicit rows win over specials.  A terminal state has no specials: it
        accepts only rows that leave it explicitly (lifecycle's seed exits).
        """
        row = self.rows.get((state, event_type))
        if row is not None:
            return row
        special = self.specials.get(event_type)
        if special is not None and state in self._special_sources(special):
            return special
        return None

    def events_from(self, state: str) -> list[EventType]:
        """Every event type accepted in ``state`` (sorted by name)."""
        return sorted((e for e in EventType if self.row_for(state, e) is not None), key=str)

    def resolve(self, state: str, context: TaskContext, event: Event) -> str:
        """The target state for ``event`` in ``state``; raises if not allowed."""
        row = self.row_for(state, event.type)
        if row is None:
            hint = "terminal state" if state in self.terminal else ""
            raise InvalidStateTransition(self.name, state, event.type, hint)
        if isinstance(row, Dynamic):
            target = row.guard(context, event)
            if target not in row.targets:
                raise InvalidStateTransition(
                    self.name, state, event.type, f"guard chose {target!r}: {row.description}"
                )
            return str(target)  # a plain string, as every state the machine holds
        return row.target

    def _special_sources(self, special: Special) -> frozenset[str]:
        if special.sources == "active":
            return self.active
        return frozenset(self.states) - self.terminal

    def edges(self) -> list[tuple[str, str, str]]:
        """(source, label, target) for every possible move: for diagrams and tables."""
        out: list[tuple[str, str, str]] = []
        for (source, event), row in self.rows.items():
            if isinstance(row, Static):
                out.append((source, str(event), row.target))
            else:
                out.extend((source, f"{event} [{t}]", t) for t in sorted(row.targets))
        for event, special in self.specials.items():
            for source in sorted(self._special_sources(special)):
                if (source, event) not in self.rows:
                    out.append((source, str(event), special.target))
        return out


def build_machine(
    name: str,
    *,
    states: Iterable[str],
    initial: str,
    terminal: Iterable[str],
    active: Iterable[str],
    rows: Iterable[Row],
    specials: Iterable[Special] = (),
    reducers: Mapping[EventType, Reducer] | None = None,
    entry_gates: Mapping[str, EntryGate] | None = None,
    suspended: str | None = None,
    same_state_is_noop: bool = False,
    description: str = "",
    stages: Mapping[str, Runs] | None = None,
    raises: Mapping[str, EventType] | None = None,
) -> Machine:
    """Validate a table and return the Machine; MachineDefinitionError if broken.

    Tables name states, stages and pools by constants (``pegasus.task.names``); the
    machine holds them as plain strings, which snapshots, the store and messages carry.
    """
    name, initial, state_list = str(name), str(initial), [str(state) for state in states]
    terminal, active = [str(state) for state in terminal], [str(state) for state in active]
    suspended = None if suspended is None else str(suspended)
    rows = [_plain(row) for row in rows]
    specials = [Special(special.event, str(special.target), special.sources) for special in specials]
    entry_gates = {str(state): gate for state, gate in (entry_gates or {}).items()}
    stages = {str(state): Runs(str(runs.stage), str(runs.pool), runs.empty_plan)
              for state, runs in (stages or {}).items()}
    raises = {str(state): event for state, event in (raises or {}).items()}

    def fail(problem: str) -> MachineDefinitionError:
        return MachineDefinitionError(f"machine {name!r}: {problem}")

    if len(set(state_list)) != len(state_list):
        raise fail("duplicate state names")
    known = set(state_list)
    terminal_set, active_set = frozenset(terminal), frozenset(active)
    for label, group in (("initial", {initial}), ("terminal", terminal_set), ("active", active_set)):
        if unknown := group - known:
            raise fail(f"unknown {label} state(s) {sorted(unknown)}")
    if active_set & terminal_set:
        raise fail(f"states both active and terminal: {sorted(active_set & terminal_set)}")
    if suspended is not None and suspended not in known:
        raise fail(f"unknown suspended state {suspended!r}")

    table: dict[tuple[str, EventType], Row] = {}
    for row in rows:
        targets = {row.target} if isinstance(row, Static) else set(row.targets)
        if unknown := ({row.source} | targets) - known:
            raise fail(f"row {row.source} --{row.event}--> uses unknown state(s) {sorted(unknown)}")
        if isinstance(row, Dynamic) and not row.targets:
            raise fail(f"dynamic row {row.source} --{row.event}--> has no possible target")
        key = (row.source, row.event)
        if key in table:
            raise fail(f"duplicate row for ({row.source}, {row.event})")
        table[key] = row

    special_map: dict[EventType, Special] = {}
    for special in specials:
        if special.target not in known:
            raise fail(f"special {special.event} targets unknown state {special.target!r}")
        if special.event in special_map:
            raise fail(f"duplicate special row for {special.event}")
        special_map[special.event] = special

    for state, _gate in entry_gates.items():
        if state not in known:
            raise fail(f"entry gate for unknown state {state!r}")

    machine = Machine(
        name=name,
        states=tuple(state_list),
        initial=initial,
        terminal=terminal_set,
        active=active_set,
        rows=table,
        specials=special_map,
        reducers=dict(reducers or {}),
        entry_gates=entry_gates,
        suspended=suspended,
        same_state_is_noop=same_state_is_noop,
        description=description,
        stages=stages,
        raises=raises,
    )
    _check_graph(machine, fail)
    _check_work(machine, fail)
    return machine


def _plain(row: Row) -> Row:
    if isinstance(row, Static):
        return Static(str(row.source), row.event, str(row.target))
    return Dynamic(str(row.source), row.event, row.guard, frozenset(str(t) for t in row.targets), row.description)


def _check_graph(machine: Machine, fail: Callable[[str], MachineDefinitionError]) -> None:
    """Every state reachable from the initial one; every non-terminal state has an exit."""
    successors: dict[str, set[str]] = {state: set() for state in machine.states}
    for source, _label, target in machine.edges():
        successors[source].add(target)
    for state in machine.states:
        if state not in machine.terminal and not successors[state] - {state}:
            raise fail(f"non-terminal state {state!r} has no exit")
    seen, frontier = {machine.initial}, [machine.initial]
    while frontier:
        for nxt in successors[frontier.pop()] - seen:
            seen.add(nxt)
            frontier.append(nxt)
    if unreachable := set(machine.states) - seen:
        raise fail(f"unreachable state(s) {sorted(unreachable)} from {machine.initial!r}")


def _check_work(machine: Machine, fail: Callable[[str], MachineDefinitionError]) -> None:
    """A machine that says what its states do says it for each state but those where a task
    waits (suspended, terminal): a stage for each active state, a stage or an event for the
    others; an event it raises must be one the state accepts."""
    if not machine.stages and not machine.raises:
        return  # not run by a task actor (lifecycle)
    waiting = machine.terminal | ({machine.suspended} if machine.suspended else set())
    for state in (*machine.stages, *machine.raises):
        if state not in machine.states or state in waiting:
            raise fail(f"{state!r} cannot run a stage or raise an event (unknown, terminal or suspended)")
        if state in machine.stages and state in machine.raises:
            raise fail(f"state {state!r} both runs a stage and raises an event")
    for state in machine.states:
        if state in machine.active and state not in machine.stages:
            raise fail(f"active state {state!r} has no stage")
        if state not in waiting and state not in machine.stages and state not in machine.raises:
            raise fail(f"state {state!r} neither runs a stage nor raises an event")
    ends = [(s, runs.empty_plan) for s, runs in machine.stages.items() if runs.empty_plan is not None]
    for state, event in (*ends, *machine.raises.items()):
        if machine.row_for(state, event) is None:
            raise fail(f"state {state!r} raises {event}, which it does not accept")
