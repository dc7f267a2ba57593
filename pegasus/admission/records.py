"""A task as Admission keeps it: its lifecycle machine, its latest snapshot, its runs, gates and stages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pegasus.admission.commands import RunEnded
from pegasus.cognitive.base import needs_more_info
from pegasus.store.quarantine import sift
from pegasus.task import EventType, TaskContext, TaskFSM, TaskSnapshot
from pegasus.task.models import StateTransition
from pegasus.task.names import CognitiveState, MachineName
from pegasus.tools.workspace import with_local_mark
from pegasus.views import usage_total


@dataclass
class TaskRecord:
    task_id: str
    machine: str
    priority: int
    seq: int
    lifecycle: TaskFSM
    snapshot: TaskSnapshot
    run: int = 0
    attempts: int = 1
    gate_failures: int = 0
    gate_index: int = 0
    gate_token: int = 0
    exit_reason: str | None = None
    error: str | None = None
    pending_resume: tuple[str, dict[str, Any]] | None = None
    inbox: list[tuple[int, str]] = field(default_factory=list)  # messages for the running run, (number, text)
    restarts: int = 0
    actor_pid: int | None = None
    cognitive_history: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.lifecycle.state

    def view(self) -> dict[str, Any]:
        """What ``get`` answers: plain data, safe to send anywhere."""
        context = self.snapshot.context
        return {
            "task_id": self.task_id, "machine": self.machine, "priority": self.priority,
            "lifecycle_state": self.lifecycle.state, "state": self.snapshot.state,
            "input": context.input_text, "source": context.source, "metadata": dict(self.lifecycle.metadata),
            "result": context.final_result, "error": self.error or context.error,
            "exit_reason": self.exit_reason, "attempts": self.attempts, "runs": self.run, "tier": context.tier,
            "iteration": context.iteration, "suspend_reason": context.suspend_reason,
            "question": context.suspend_reason if self.snapshot.state == CognitiveState.SUSPENDED
            and needs_more_info(context.reasoning) else None,
            "created_at": self.lifecycle.created_at.isoformat(), "updated_at": self.lifecycle.updated_at.isoformat(),
            "stages": list(self.stages), "gates": list(self.gates), "actor_pid": self.actor_pid,
            "usage": usage_total(self.stages), "messages": list(context.messages),
            "messages_waiting": len(self.inbox),
        }


def record_from_row(row: dict[str, Any], transitions: list[dict[str, Any]]) -> TaskRecord:
    """A task's record as the store has it (its row and its transitions), its snapshot a placeholder until rebuilt."""
    history = [StateTransition(from_state=t["from_state"], to_state=t["to_state"], trigger_event_type=t["event"],
                               trigger_event_id="", timestamp=t["timestamp"])
               for t in transitions if t["machine"] == MachineName.LIFECYCLE]
    lifecycle = TaskFSM(MachineName.LIFECYCLE, task_id=row["task_id"], context=TaskContext(input_text=row["input"]),
                        priority=row["priority"], metadata=dict(row["metadata"] or {}),
                        state=row["lifecycle_state"], history=history)
    placeholder = new_fsm(row["machine"], row["task_id"], row["input"], row["source"], row["priority"],
                           dict(row["metadata"] or {})).snapshot()
    record = TaskRecord(row["task_id"], row["machine"], row["priority"], row["seq"], lifecycle, placeholder,
                        run=row["runs"], attempts=row["attempts"], gate_failures=row["gate_failures"],
                        exit_reason=row["exit_reason"], error=row["error"])
    if row["pending_resume"]:
        event, payload = row["pending_resume"]
        record.pending_resume = (event, dict(payload))
    record.cognitive_history = [{"run": t["run"], "from_state": t["from_state"], "to_state": t["to_state"],
                                 "event": t["event"], "timestamp": t["timestamp"]}
                                for t in transitions if t["machine"] != MachineName.LIFECYCLE]
    return record


def restorable(store: Any, quarantined: dict[str, str]) -> Iterator[TaskRecord]:
    """The unfinished tasks' records.  A row no handler can follow (columns that will not decode, a machine no
    longer known, a state no version has, transitions that will not read: written by an old version, a removed
    plugin or a bug) is quarantined (``pegasus.store.quarantine``) -- failed, ``fatal_error``, its error saying why, so
    it is not restored again -- and noted in ``quarantined``; never raised (it would stop the start, and the
    supervisor's every restart after it)."""
    def set_aside(row: dict[str, Any], error: str) -> None:
        quarantined[str(row["task_id"])] = error
        store.lifecycle_transition(row["task_id"], str(row["lifecycle_state"]), "failed", "TASK_FAILED",
                                   actor="supervisor", reason=error,
                                   updates={"exit_reason": "fatal_error", "error": error})

    def read(row: dict[str, Any]) -> TaskRecord:
        return record_from_row(row, store.transitions(row["task_id"]))

    return sift(store.unfinished_tasks(set_aside), read, set_aside)


def new_fsm(machine: str, task_id: str, text: str, source: str, priority: int,
             metadata: dict[str, Any], tier: str | None = None) -> TaskFSM:
    # The context's metadata (what the tools read) carries the local mark, set by origin, never by a request
    context = TaskContext(input_text=text, input_metadata=with_local_mark(metadata, source), source=source,
                          tier=tier)
    return TaskFSM(machine, task_id=task_id, context=context, priority=priority, metadata=dict(metadata))


def stage_detail(stage: dict[str, Any]) -> dict[str, Any]:
    """What a subscriber learns of a finished stage: its name, pool and model tier and, when its worker timed it,
    its seconds (the HTTP gateway's stage latency histogram)."""
    detail: dict[str, Any] = {"stage": stage["stage"], "pool": stage.get("pool"),
                              "tier": (stage.get("usage") or {}).get("tier")}
    started, finished = stage.get("started"), stage.get("finished")
    if isinstance(started, (int, float)) and isinstance(finished, (int, float)):
        detail["seconds"] = round(max(0.0, finished - started), 6)
    return detail


ACTORS = {
    EventType.TASK_STARTED: "runner", EventType.EXECUTION_COMPLETED: "runner", EventType.TASK_BLOCKED: "runner",
    EventType.TASK_FAILED: "runner", EventType.TASK_VERIFIED: "verifier", EventType.GATE_FAILED: "verifier",
    EventType.TASK_CANCELED: "user", EventType.TASK_UNBLOCKED: "user", EventType.TASK_RETRIED: "user",
}


def run_ended(record: TaskRecord, outcome: str, exit_reason: str | None = None, failed: str | None = None) -> RunEnded:
    """The end of the record's current run, said where Admission lets a run go, so once: a report or a death
    after it finds the run canceled, replaced or no longer running, and changes nothing."""
    return RunEnded(record.task_id, record.run, record.machine, dict(record.snapshot.context.input_metadata), outcome,
                    exit_reason, failed)
