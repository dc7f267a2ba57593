"""A task run between two events, as a value (``RunSnapshot``), and the keys of its journalled steps.

A run starts from its snapshot (``TaskRun(snapshot)``), in any process; its host keeps the ``TaskRun``
between two of its messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pegasus.store.journal import ENDED
from pegasus.task.models import TaskContext, TaskSnapshot


def step_key(task_id: str, generation: str, iteration: int, step_index: int) -> str:
    """The idempotency key of one tool step (task, attempt, iteration, step).

    ``generation`` names the attempt: it changes when the task is deliberately
    run again (retry, a failed gate) and stays the same across restarts after a
    crash, so a restarted run finds its own steps in the journal.
    """
    return f"{task_id}/a{generation}/i{iteration}/s{step_index}"


def sub_task_key(task_id: str, generation: str, context: TaskContext, step_index: int) -> str:
    """The key of a sub_task step: its child is made once per key.  reason_act's iteration stays 0
    across its rounds, so the key also names the plan, by the number of results before it
    (``r``): a later round's step 0 is another step, with another child."""
    plan = context.plan
    done = sum(step.completed for step in plan.steps) if plan is not None else 0
    return f"{task_id}/a{generation}/i{context.iteration}/r{len(context.actions_done) - done}/s{step_index}"


@dataclass(frozen=True)
class RunSnapshot:
    """A run between two events, as a value: the task and what the run keeps besides.

    ``journal``: the task's journal rows when the run started (key -> row);
    ``step_in_flight``: the key of the journalled step whose answer is awaited;
    ``checkpoint_base``: the context as the last checkpoint left it (None: the task's).
    """

    task: TaskSnapshot
    run: int
    max_iterations: int
    generation: str = "1"
    journal: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    token: int = 0
    step_in_flight: str | None = None
    redispatched: frozenset[str] = frozenset()
    checkpoint_base: dict[str, Any] | None = None
    exit_reason: str | None = None
    stopped: bool = False
    inbox: tuple[tuple[int, str], ...] = ()  # (number, text) of messages not yet taken
    recall_k: int = 0  # memories recalled before each iteration's think / reason ([memory] recall_k; 0: none)
    identity: str = ""  # with recall off: the identity the think / reason stages are given all the same
    checkpoint_source: TaskContext | None = None  # the context ``checkpoint_base`` was dumped from (None: unknown)
    awaited: bool = False  # a sub-task: its parent waits for its end


def ended(row: Mapping[str, Any] | None) -> bool:
    return row is not None and row.get("status") in ENDED and bool(row.get("result"))
