"""The task tree: sub_task steps become child tasks, and a parent waits for them holding nothing.

A run stopped at sub_task steps blocks its parent (no slot, no worker, no run) and makes one child
per step key, once; each child's end is written as the parent's journal row for its step, and once
all are in the parent runs again and replays them.  Limits ``[subtasks]`` fail a step, for the
reflection to judge.  The store holds links and step ends, so a restart finds the tree whole
(docs/subtasks.md).  A helper of Admission.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, Protocol

from pegasus import codec
from pegasus.errors import PegasusError
from pegasus.idempotency import Claim, submit_claim
from pegasus.store.quarantine import sift
from pegasus.run.commands import ChildStep
from pegasus.run.snapshot import sub_task_key
from pegasus.store.journal import ENDED
from pegasus.store.tree import Link
from pegasus.submission import check_task
from pegasus.task.errors import TaskNotFoundError
from pegasus.task.events import EventType
from pegasus.task.machines import COGNITIVE_MACHINES
from pegasus.task.models import ActionResult
from pegasus.tools.workspace import LOCAL
from pegasus.tracing import TRACEPARENT, child_traceparent
from pegasus.task.names import CognitiveState, LifecycleState

if TYPE_CHECKING:
    from pegasus.admission.commands import Command
    from pegasus.admission.ports import StorePort
    from pegasus.admission.records import TaskRecord
    from pegasus.config import Settings

SUB_TASK = "sub_task"  # the idempotency scope of children (their key: the parent's step key)
ENDS = frozenset({LifecycleState.DONE, LifecycleState.FAILED, LifecycleState.CANCELED})


class SubTaskRefused(PegasusError):
    """A sub_task step that makes no child: the step's failed result says why."""


def generation_of(record: TaskRecord) -> str:
    """The attempt part of a task's step keys (a retry or a failed gate starts a new one)."""
    return f"{record.attempts}.{record.gate_failures}"


def waiting_steps(record: TaskRecord) -> list[tuple[str, int]]:
    """(key, step index) of the sub_task steps a blocked parent waits for; [] for any other task.

    Derived from the parent's snapshot, as its run does: the consecutive sub_task steps from the
    plan's current one.  A blocked task whose machine is not suspended waits for children.
    """
    snapshot = record.snapshot
    plan = snapshot.context.plan
    if record.state != LifecycleState.BLOCKED or snapshot.state == CognitiveState.SUSPENDED or plan is None \
            or plan.current_step is None:
        return []
    steps = []
    for step in plan.steps[plan.steps.index(plan.current_step):]:
        if step.completed or step.action_type != "sub_task":
            break
        steps.append((sub_task_key(record.task_id, generation_of(record), snapshot.context, step.index), step.index))
    return steps


class _Admission(Protocol):
    """What the tree uses of Admission (whose helper it is: Admission imports this module)."""

    settings: Settings
    store: StorePort
    records: dict[str, TaskRecord]
    quarantined: dict[str, str]

    def submit(self, text: str, machine: str, priority: int, metadata: dict[str, Any], source: str,
               key: str | None = None, *, claim: Claim | None = None,
               link: Link | None = None, tier: str | None = None) -> tuple[TaskRecord, list[Command]]: ...
    def task_for(self, claim: Claim | None) -> str | None: ...
    def cancel(self, task_id: str, reason: str) -> list[Command]: ...
    def _lifecycle(self, record: TaskRecord, event_type: EventType, *, actor: str | None = None,
                   **payload: Any) -> list[Command]: ...
    def _approve(self, record: TaskRecord, reason: str, actor: str = "system") -> list[Command]: ...
    def _enqueue(self, record: TaskRecord) -> None: ...
    def _fill(self) -> list[Command]: ...
    def _fail_unrecoverable(self, record: TaskRecord, error: str) -> list[Command]: ...


class Tree:
    """The task tree of one Admission (see the module docstring)."""

    def __init__(self, admission: _Admission) -> None:
        self.admission = admission

    # -- fan-out ------------------------------------------------------------------------------
    def wait(self, parent: TaskRecord, children: tuple[ChildStep, ...]) -> list[Command]:
        """The parent's run stopped at sub_task steps: block it, make its children (or refuse them)."""
        admission, store = self.admission, self.admission.store
        effects = admission._lifecycle(parent, EventType.TASK_BLOCKED,
                                       reason=f"waiting for {len(children)} sub-task(s)")
        journal = store.journal(parent.task_id)
        prefix = f"{parent.task_id}/a{generation_of(parent)}/"
        started = sum(1 for link in store.children_of(parent.task_id) if link.step_key.startswith(prefix))
        link = store.link_of(parent.task_id)
        depth = (link.depth if link is not None else 0) + 1
        for child in children:
            if _ended(journal.get(child.key)):
                continue
            try:
                made, new = self._spawn(parent, child, depth, started)
            except (PegasusError, ValueError) as exc:  # refused: the step's result says why
                self._finish(parent.task_id, parent.run, child.key, child.step_index,
                             _result(child.step_index, str(child.params.get("text", "")), None, False, None,
                                     f"sub_task refused: {exc}", refused=True))
                continue
            started += new
            effects += made
        return effects + self.fan_in(parent)

    def _spawn(self, parent: TaskRecord, child: ChildStep, depth: int, started: int) -> tuple[list[Command], int]:
        """The child of one step: created (effects, 1), or the one its key made before ([] , 0)."""
        admission, settings = self.admission, self.admission.settings
        text, machine, priority, metadata = self._checked(parent, child)
        # The claim leaves out the trace: the run that asks again after a restart asks for the same child.
        same = {key: value for key, value in metadata.items() if key != TRACEPARENT}
        claim = Claim(SUB_TASK, child.key, submit_claim(child.key, text, machine, priority, same).fingerprint)
        known = admission.task_for(claim)
        if known is not None:  # made before (a restarted parent run): never twice
            return self._ended_before(known), 0
        limits = settings.subtasks
        if depth > limits.max_depth:
            raise SubTaskRefused(f"the child would be at depth {depth}; [subtasks] max_depth is {limits.max_depth}")
        if started >= limits.max_children:
            raise SubTaskRefused(f"task {parent.task_id} has started {started} children in this attempt; "
                                 f"[subtasks] max_children is {limits.max_children}")
        record, effects = admission.submit(text, machine, priority, metadata, SUB_TASK, claim=claim,
                                           link=Link("", parent.task_id, depth, child.key, child.step_index),
                                           tier=parent.snapshot.context.tier)  # a child runs on its parent's tier
        if record.state == LifecycleState.DRAFT:  # manual approval: the parent's covers its own work
            effects += admission._approve(record, f"approved with its parent {parent.task_id}")
        return effects, 1

    def _checked(self, parent: TaskRecord, child: ChildStep) -> tuple[str, str, int, dict[str, Any]]:
        """The child's text, machine, priority and metadata; ValueError naming what is wrong."""
        params, runtime = child.params, self.admission.settings.runtime
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"step {child.step_index} has no text (action_params.text) for its sub-task")
        machine = params.get("machine") or parent.machine
        if machine not in COGNITIVE_MACHINES:
            raise ValueError(f"unknown machine {machine!r}; machines are {', '.join(COGNITIVE_MACHINES)}")
        priority = params.get("priority", parent.priority)
        if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 1_000_000:
            raise ValueError(f"priority must be an integer from 0 to 1000000, got {priority!r}")
        metadata = params.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
        inherited = parent.snapshot.context.input_metadata
        metadata = {**metadata, "workspace": _narrowed(inherited.get("workspace"), metadata.get("workspace")),
                    LOCAL: inherited.get(LOCAL) is True,  # the parent's mark, never the step's
                    TRACEPARENT: child_traceparent(parent.task_id, parent.run, parent.lifecycle.metadata)}
        if metadata["workspace"] is None:
            del metadata["workspace"]
        check_task(text, metadata, machine, runtime)
        return text, str(machine), priority, metadata

    # -- fan-in ---------------------------------------------------------------------------------
    def ended(self, child: TaskRecord, state: str, reason: str) -> list[Command]:
        """A task reached done, failed or canceled: if it is a sub-task, its parent's step has its result."""
        store = self.admission.store
        link = store.link_of(child.task_id)
        if link is None:
            return []
        context = child.snapshot.context
        self._finish(link.parent_id, child.run, link.step_key, link.step_index,
                     _outcome(link.step_index, child.task_id, context.input_text, state, context.final_result,
                              child.error or context.error, reason))
        parent = self.admission.records.get(link.parent_id)
        return self.fan_in(parent) if parent is not None else []

    def fan_in(self, parent: TaskRecord) -> list[Command]:
        """Queue the parent again once every step it waits for has ended."""
        steps = waiting_steps(parent)
        if not steps:
            return []
        journal = self.admission.store.journal(parent.task_id)
        if not all(_ended(journal.get(key)) for key, _ in steps):
            return []
        effects = self.admission._lifecycle(parent, EventType.TASK_UNBLOCKED, reason="its sub-tasks ended")
        self.admission._enqueue(parent)
        return effects + self.admission._fill()

    def _ended_before(self, child_id: str) -> list[Command]:
        """A child made before whose end the parent's journal may lack (a crash between the two)."""
        record = self.admission.records.get(child_id)
        if record is not None:
            return self.ended(record, record.state, "") if record.state in ENDS else []
        row = self.admission.store.task_row(child_id)
        link = self.admission.store.link_of(child_id)
        if row is None or link is None or row["lifecycle_state"] not in ENDS:
            return []
        self._finish(link.parent_id, 0, link.step_key, link.step_index,
                     _outcome(link.step_index, child_id, row["input"], row["lifecycle_state"], row["result"],
                              row["error"], row["exit_reason"] or ""))
        return []

    def restore(self) -> list[Command]:
        """After a restart: every waiting parent's children looked at again; a parent whose steps all
        ended (a crash came between the last child's end and the parent's queueing) is queued.  A parent
        whose rows (journal, links, children) cannot be followed is quarantined: it fails alone."""
        effects: list[Command] = []

        def set_aside(record: TaskRecord, error: str) -> None:
            self.admission.quarantined[record.task_id] = error
            effects.extend(self.admission._fail_unrecoverable(record, error))

        for more in sift(list(self.admission.records.values()), self._restore_one, set_aside):
            effects += more
        return effects

    def _restore_one(self, record: TaskRecord) -> list[Command]:
        effects: list[Command] = []
        steps = waiting_steps(record)
        journal = self.admission.store.journal(record.task_id) if steps else {}
        for key, _ in steps:
            if not _ended(journal.get(key)):
                known = self.admission.store.claimed(SUB_TASK, key)
                if known is not None:
                    effects += self._ended_before(str(known["task_id"]))
        return effects + self.fan_in(record)

    def _finish(self, task_id: str, run: int, key: str, step_index: int, result: dict[str, Any]) -> None:
        event = EventType.TOOL_CALL_COMPLETED if result["success"] else EventType.TOOL_CALL_FAILED
        self.admission.store.finish_step(task_id, run, key, step_index,
                                         codec.pack({"event_type": event.value, "payload": {"result": result}}))

    # -- control --------------------------------------------------------------------------------
    def cancel_descendants(self, task_id: str, reason: str) -> list[Command]:
        """Cancel each child still going (and, through it, its own)."""
        effects: list[Command] = []
        for link in self.admission.store.children_of(task_id):
            child = self.admission.records.get(link.child_id)
            if child is None or child.state in ENDS:
                continue
            try:
                effects += self.admission.cancel(link.child_id, f"its parent {task_id} was canceled ({reason})")
            except PegasusError:
                continue  # between states that cannot be canceled (verified): it ends by itself
        return effects

    def refuse_suspend(self, record: TaskRecord) -> str | None:
        """Why a task cannot be suspended, when it is waiting for its children."""
        if not waiting_steps(record):
            return None
        return (f"task {record.task_id} is waiting for its sub-tasks and holds nothing to suspend; suspend or "
                f"cancel them (pegasus tree {record.task_id})")

    # -- views ------------------------------------------------------------------------------------
    def view_of(self, task_id: str) -> dict[str, Any]:
        """What ``status`` adds: the parent, the depth, the children and the ones still awaited."""
        store = self.admission.store
        link = store.link_of(task_id)
        children = [child.child_id for child in store.children_of(task_id)]
        record = self.admission.records.get(task_id)
        awaited: list[str] = []
        if record is not None and (steps := waiting_steps(record)):
            journal = store.journal(task_id)
            keys = {key for key, _ in steps if not _ended(journal.get(key))}
            awaited = [child.child_id for child in store.children_of(task_id) if child.step_key in keys]
        return {"parent_id": link.parent_id if link else None, "depth": link.depth if link else 0,
                "children": children, "waiting_for": awaited}

    def subtree(self, task_id: str, depth_left: int = 16) -> dict[str, Any]:
        """The task and its descendants, each with its lifecycle and machine states."""
        store, record = self.admission.store, self.admission.records.get(task_id)
        if record is not None:
            node = {"task_id": task_id, "lifecycle_state": record.state, "state": record.snapshot.state,
                    "input": record.snapshot.context.input_text, "result": record.snapshot.context.final_result,
                    "error": record.error}
        else:  # finished and forgotten: as the store has it
            row = store.task_row(task_id)
            if row is None:
                raise TaskNotFoundError(task_id)
            node = {"task_id": task_id, "lifecycle_state": row["lifecycle_state"], "state": row["cognitive_state"],
                    "input": row["input"], "result": row["result"], "error": row["error"]}
        links = store.children_of(task_id)
        node["waiting"] = bool(record is not None and waiting_steps(record))
        node["children"] = [{**self.subtree(link.child_id, depth_left - 1), "step_index": link.step_index}
                            for link in links] if depth_left > 0 else []
        return node


def _ended(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("status") in ENDED and bool(row.get("result"))


def _narrowed(parent: Any, requested: Any) -> str | None:
    """The child's workspace: the parent's, or a directory inside it (relative: to the parent's)."""
    if requested is None or requested == "":
        return None if parent is None else str(parent)
    if not isinstance(requested, str):
        raise ValueError("metadata.workspace must be a path")
    if parent is None:
        return requested  # the parent works in the workspace root: the tools keep the child inside it
    path = posixpath.normpath(posixpath.join(str(parent), requested))
    if posixpath.commonpath([path, posixpath.normpath(str(parent))]) != posixpath.normpath(str(parent)):
        raise ValueError(f"the sub-task's workspace {path} is outside its parent's {parent}")
    return path


def _outcome(step_index: int, child_id: str, text: str, state: str, output: Any, error: str | None,
             reason: str) -> dict[str, Any]:
    """A child's end as its step's result: done succeeds; failed and canceled fail with why."""
    if state == LifecycleState.DONE:
        return _result(step_index, text, child_id, True, output, None)
    why = (f"sub-task {child_id} was canceled: {reason or 'canceled'}" if state == LifecycleState.CANCELED
           else f"sub-task {child_id} failed: {error or reason or 'failed'}")
    return _result(step_index, text, child_id, False, output, why)


def _result(step_index: int, text: str, child_id: str | None, success: bool, output: Any,
            error: str | None, refused: bool = False) -> dict[str, Any]:
    params = {"text": text, **({"task_id": child_id} if child_id else {})}
    return ActionResult(step_index=step_index, action_type="sub_task", tool=SUB_TASK, params=params,
                        success=success, output=output, error=error, refused=refused).model_dump(mode="json")
