"""Text views of a machine: a transition table, JSON data and a Mermaid diagram."""

from __future__ import annotations

from typing import Any

from pegasus.task.engine import Machine, Static


def describe(machine: Machine) -> dict[str, Any]:
    """The machine as plain data (what ``pegasus machines NAME --json`` prints)."""
    rows: list[dict[str, Any]] = []
    for (source, event), row in machine.rows.items():
        entry: dict[str, Any] = {"from": source, "event": str(event)}
        if isinstance(row, Static):
            entry.update(kind="static", to=row.target)
        else:
            entry.update(kind="dynamic", to=sorted(row.targets), rule=row.description)
        rows.append(entry)
    specials = [
        {"event": str(s.event), "to": s.target, "from": s.sources} for s in machine.specials.values()
    ]
    return {
        "name": machine.name,
        "description": machine.description,
        "states": list(machine.states),
        "initial": machine.initial,
        "terminal": sorted(machine.terminal),
        "active": [s for s in machine.states if s in machine.active],
        "transitions": rows,
        "special": specials,
        "entry_gates": {state: gate.description for state, gate in machine.entry_gates.items()},
        "same_state_is_noop": machine.same_state_is_noop,
        # what each state runs, on which pool (a cognitive machine's; the dashboard names a task's stage by it)
        "stages": {state: {"stage": str(runs.stage), "pool": str(runs.pool)} for state, runs in machine.stages.items()},
    }


def table(machine: Machine) -> str:
    """A human-readable transition table."""
    data = describe(machine)
    lines = [
        f"{machine.name}: {machine.description}",
        f"states:   {', '.join(machine.states)}",
        f"initial:  {machine.initial}",
        f"terminal: {', '.join(data['terminal'])}",
        f"active:   {', '.join(data['active'])}",
        "",
    ]
    width_from = max(len(r["from"]) for r in data["transitions"])
    width_event = max(len(r["event"]) for r in data["transitions"])
    for row in data["transitions"]:
        target = row["to"] if row["kind"] == "static" else f"{' | '.join(row['to'])}  ({row['rule']})"
        lines.append(f"  {row['from']:<{width_from}}  --{row['event']:<{width_event}} -->  {target}")
    for special in data["special"]:
        lines.append(f"  <any {special['from']}>  --{special['event']}-->  {special['to']}")
    for state, gate in data["entry_gates"].items():
        lines.append(f"  entering {state}: {gate}")
    if machine.same_state_is_noop:
        lines.append("  a request for the current state is a no-op (no history entry)")
    return "\n".join(lines)


def mermaid(machine: Machine) -> str:
    """A Mermaid ``stateDiagram-v2`` that any Markdown viewer with Mermaid renders."""
    lines = ["stateDiagram-v2", f"    [*] --> {machine.initial}"]
    lines.extend(f"    {source} --> {target}: {label}" for source, label, target in machine.edges())
    lines.extend(f"    {state} --> [*]" for state in machine.states if state in machine.terminal)
    return "\n".join(lines)
