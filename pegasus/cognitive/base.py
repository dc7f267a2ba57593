"""The processor interfaces of seed 004, as Protocols.

A processor is stateless: it reads a TaskContext and returns the stage's result, one instance for
any number of tasks.  Synchronous, unlike the seed's ``async def``: processors run in plain
synchronous worker actors whose pool size is the concurrency limit.  A Thinker or Reasoner that
needs more information says so as data (``{"need_more_info": True, "question": ...}``; a Reasoner's
plan is then None).  ``plan_results`` and ``jsonable`` serve every processor set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pegasus.errors import PegasusError
from pegasus.task.models import ActionResult, Plan, PlanStep, Reflection, TaskContext

if TYPE_CHECKING:
    from pegasus.cognitive.post_reflect import PostReflector

# The error of a tool step that may or may not have had its effect (its worker or
# its task actor died mid-step) and whose tool is not idempotent: never retried.
INTERRUPTED = "interrupted; not repeated"
NEED_MORE_INFO = "need_more_info"
QUESTION = "question"


INT64_MAX = 2**63 - 1


def needs_more_info(reasoning: dict[str, Any] | None) -> bool:
    """Whether a reasoning dict asks the user for more information."""
    return bool(reasoning and reasoning.get(NEED_MORE_INFO))


def plan_results(context: TaskContext) -> list[ActionResult]:
    """The results of the current plan's completed steps (each executed step adds exactly one)."""
    done = sum(step.completed for step in context.plan.steps) if context.plan else 0
    return context.actions_done[-done:] if done else []


def failed_steps(context: TaskContext) -> tuple[str, str] | None:
    """Why a task whose loop is about to end must fail instead: ``(exit_reason, error)``, or None.

    A task whose answer depends on a failed step does not end done: ``unknown`` when an effectful step was
    interrupted in this attempt (its effect may have happened: never repeated, listed in ``effects_unknown``),
    else ``retry_exhausted`` when a tool step of the last plan failed (the answer is built from that plan),
    ``fatal_error`` when every such step was refused (deterministic: never retried).
    """
    interrupted = [r for r in context.actions_done if (r.error or "").startswith(INTERRUPTED)]
    if interrupted:
        return "unknown", (f"{len(interrupted)} effectful tool step(s) were interrupted and their effect is "
                           "unknown: " + "; ".join(_step_name(r) for r in interrupted))
    failed = [r for r in plan_results(context) if r.action_type in ("tool_call", "sub_task") and not r.success]
    if failed:
        reason = "fatal_error" if all(r.refused for r in failed) else "retry_exhausted"
        return reason, (f"{len(failed)} tool step(s) failed: "
                                   + "; ".join(f"{_step_name(r)}: {r.error}" for r in failed))
    return None


def _step_name(result: ActionResult) -> str:
    return f"{result.tool or result.action_type} (step {result.step_index})"


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data that msgpack can also carry.

    Stage payloads cross processes (pickled by Thespian) and are checkpointed
    (msgpack), so a processor's odd value (a Path, a tuple, a 100-digit int, NaN)
    is turned into its nearest plain form here instead of failing there.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) <= INT64_MAX else str(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):  # sorted: the same set gives the same payload
        return [jsonable(item) for item in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return str(value)


class Perceiver(Protocol):
    def run(self, context: TaskContext) -> dict[str, Any]:
        """The structured perception of the input (intents, entities)."""


class Thinker(Protocol):
    def run(self, context: TaskContext) -> dict[str, Any]:
        """The reasoning; ``need_more_info`` and ``question`` when the task cannot go on."""


class Planner(Protocol):
    def run(self, context: TaskContext) -> Plan:
        """The plan: ordered steps, the last one usually ``respond``."""


class StepRunner(Protocol):
    """Seed 004 calls it ``Actor``; renamed so that it is not mistaken for a Thespian actor."""

    def run_step(self, context: TaskContext, step: PlanStep) -> ActionResult:
        """Run one step.  A failing tool is a result with success=False, not an exception."""


class Reflector(Protocol):
    def run(self, context: TaskContext) -> Reflection:
        """The verdict on what was done: complete, continue or replan."""


class Reasoner(Protocol):
    def run(self, context: TaskContext) -> tuple[dict[str, Any], Plan | None]:
        """The reasoning and the plan (None when more information is needed)."""


class StageError(PegasusError):
    """An llm-stage processor failed; ``stage`` names the stage, ``message`` says why."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"stage {stage!r} failed: {message}")
        self.stage = stage
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:  # picklable although __init__ takes two arguments
        return (type(self), (self.stage, self.message))


@dataclass(frozen=True)
class Processors:
    """One set of stateless processors (seed 004), shared by every task a worker serves."""

    perceiver: Perceiver
    thinker: Thinker
    planner: Planner
    step_runner: StepRunner
    reflector: Reflector
    reasoner: Reasoner
    post_reflector: PostReflector | None = None  # after done; None: the offline one
