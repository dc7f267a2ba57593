"""The one entry point of the stage workers: ``run_stage`` turns a stage of a task
into the event the task actor applies to its state machine.

It owns which processor runs a stage and the shape of each event's payload; which pool runs it is
the machine tables' word.  Processors are synchronous: the pool's size is the concurrency limit,
and an event loop in a worker would only add a second scheduler.  A failed tool is an outcome
(TOOL_CALL_FAILED), not an exception, so the task decides; an llm-stage exception is a StageError.
It must not import Thespian or actors, or touch the FSM.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pegasus.cognitive.base import (
    QUESTION,
    Processors,
    StageError,
    failed_steps,
    jsonable,
    needs_more_info,
    plan_results,
)
from pegasus.cognitive.offline import (
    OfflinePerceiver,
    OfflinePlanner,
    OfflineReasoner,
    OfflineReflector,
    OfflineStepRunner,
    OfflineThinker,
)
from pegasus.cognitive.post_reflect import OfflinePostReflector
from pegasus.config import LLM_STAGE_NAMES, Settings
from pegasus.llm.context import noting
from pegasus.llm.usage import metering
from pegasus.task.events import EventType
from pegasus.task.machines import COGNITIVE_MACHINES, STAGE_POOLS
from pegasus.task.models import ActionResult, PlanStep, TaskContext
from pegasus.task.names import MachineName, PoolName, StageName
from pegasus.tools.builtin import default_registry
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolRegistry

LLM_STAGES = tuple(stage for stage, pool in STAGE_POOLS.items() if pool == PoolName.LLM)
TOOL_STAGES = tuple(stage for stage, pool in STAGE_POOLS.items() if pool == PoolName.TOOL)
MACHINES = COGNITIVE_MACHINES


# Stages no machine state runs: the supervisor's (after done).
SUPERVISOR_STAGES: dict[str, str] = {StageName.POST_REFLECT: PoolName.LLM, StageName.EMBED_QUERY: PoolName.LLM,
                                     StageName.EMBED_ROWS: PoolName.LLM}
# Stages that call the embeddings endpoint, not a chat model (a StageRequest's ``texts``; pegasus.memory.embeddings).
EMBED_STAGES = frozenset({StageName.EMBED_QUERY, StageName.EMBED_ROWS})


def pool_for(stage: str) -> str:
    """The pool whose workers run ``stage`` (PoolName.LLM or PoolName.TOOL)."""
    try:
        return STAGE_POOLS[stage] if stage in STAGE_POOLS else SUPERVISOR_STAGES[stage]
    except KeyError:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGE_POOLS)}") from None


@dataclass(frozen=True)
class StageOutcome:
    """What a stage produced: the event for the task's FSM and its JSON-able payload.

    ``usage`` sums the model calls the stage made (prompt_tokens,
    completion_tokens, total_tokens, calls, model); None when it made none.
    """

    event_type: EventType
    payload: dict[str, Any]
    usage: dict[str, Any] | None = None
    context: list[dict[str, Any]] | None = None  # the context budget's fits (pegasus.llm.context), if any


def offline_processors(tools: ToolRegistry | None = None, *,
                       timer: Callable[[], float] = time.perf_counter) -> Processors:
    """The deterministic offline set; ``timer`` measures step durations (tests pass a fixed one)."""
    perceiver = OfflinePerceiver()
    thinker = OfflineThinker(perceiver)
    return Processors(
        perceiver=perceiver,
        thinker=thinker,
        planner=OfflinePlanner(thinker),
        step_runner=OfflineStepRunner(tools if tools is not None else default_registry(), timer),
        reflector=OfflineReflector(),
        reasoner=OfflineReasoner(thinker),
        post_reflector=OfflinePostReflector(),
    )


def processors_for(settings: Settings, tools: ToolRegistry | None = None, *, tier: str | None = None,
                   callers: dict[str, Any] | None = None) -> Processors:
    """The processor set ``[llm] provider`` names, with the tools of ``settings`` (``registry_for``).

    "offline" (the default): the deterministic set.  "openai": the llm set, on any
    OpenAI-compatible endpoint (``[llm] base_url``, ``model``, ``api_key_env``); with ``tier``, every
    model stage on that tier (a task's ``--tier``); ``callers``: model callers shared with other sets.
    """
    tools = tools if tools is not None else registry_for(settings)
    if settings.llm.provider == "offline":
        return offline_processors(tools)
    # Imported here: an offline worker never loads the model client (the openai SDK and its imports).
    from pegasus.cognitive.llm import llm_processors  # noqa: PLC0415

    return llm_processors(settings, tools, tier=tier, callers=callers)


class ProcessorSets:
    """A worker's processors: the set of ``[llm.stages]``, and one per task tier asked for (``submit --tier``),
    each built when first asked, their model clients shared by tier (one per endpoint, not per set)."""

    def __init__(self, settings: Settings, tools: ToolRegistry) -> None:
        self.settings, self.tools = settings, tools
        self.callers: dict[str, Any] = {}
        self.sets: dict[str | None, Processors] = {}

    def of(self, tier: str | None, stage: str) -> Processors:
        """The set that runs ``stage`` of a task of ``tier`` (None: the stages' own tiers); one set where no
        model is asked (offline, the act stage)."""
        tier = tier if self.settings.llm.provider != "offline" and stage in LLM_STAGE_NAMES else None
        if tier not in self.sets:
            self.sets[tier] = processors_for(self.settings, self.tools, tier=tier, callers=self.callers)
        return self.sets[tier]


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def _perceive(processors: Processors, context: TaskContext) -> StageOutcome:
    return StageOutcome(EventType.PERCEIVE_DONE, {"perception": jsonable(processors.perceiver.run(context))})


def _need_more_info(reasoning: dict[str, Any]) -> StageOutcome:
    question = str(reasoning.get(QUESTION) or "more information is needed")
    return StageOutcome(EventType.NEED_MORE_INFO, {"reasoning": jsonable(reasoning), "question": question})


def _think(processors: Processors, context: TaskContext) -> StageOutcome:
    reasoning = processors.thinker.run(context)
    if needs_more_info(reasoning):
        return _need_more_info(reasoning)
    return StageOutcome(EventType.THINK_DONE, {"reasoning": jsonable(reasoning)})


def _plan(processors: Processors, context: TaskContext) -> StageOutcome:
    return StageOutcome(EventType.PLAN_DONE, {"plan": _dump(processors.planner.run(context))})


def _reason(processors: Processors, context: TaskContext) -> StageOutcome:
    reasoning, plan = processors.reasoner.run(context)
    if plan is None or needs_more_info(reasoning):
        return _need_more_info(reasoning)
    if not any(step.action_type == "tool_call" for step in plan.steps) and (failure := failed_steps(context)):
        # A plan without tool calls answers (seed 001: it completes the task): not over a failed step.
        # The model's answer, when it wrote one (a respond step's text), stays the result.
        answer = next((step.action_params["text"] for step in plan.steps if step.action_params.get("text")), None)
        return _give_up(failure, context, {"reasoning": jsonable(reasoning)}, answer)
    return StageOutcome(EventType.REASON_DONE, {"reasoning": jsonable(reasoning), "plan": _dump(plan)})


def _give_up(failure: tuple[str, str], context: TaskContext, payload: dict[str, Any],
             answer: Any = None) -> StageOutcome:
    """TASK_FAILED instead of completing; the answer so far (failures explained) stays the result."""
    exit_reason, error = failure
    result = answer if answer is not None else _final_answer(context, error)
    return StageOutcome(EventType.TASK_FAILED, {**payload, "exit_reason": exit_reason, "error": error,
                                                "final_result": jsonable(result)})


def _final_answer(context: TaskContext, fallback: str) -> Any:
    """The answer of the last plan's respond step, else the answer so far, else ``fallback``."""
    for result in reversed(plan_results(context)):
        if result.action_type == "respond" and result.success:
            return result.output
    return context.final_result if context.final_result is not None else fallback


def _reflect(processors: Processors, context: TaskContext) -> StageOutcome:
    reflection = processors.reflector.run(context)
    payload: dict[str, Any] = {"reflection": _dump(reflection)}
    if reflection.verdict == "complete":
        if failure := failed_steps(context):  # whatever the reflector says: not done over a failed step
            return _give_up(failure, context, payload)
        payload["final_result"] = jsonable(_final_answer(context, reflection.assessment))
    return StageOutcome(EventType.REFLECT_DONE, payload)


def _post_reflect(processors: Processors, context: TaskContext) -> StageOutcome:
    """After done: what the task leaves in memory.  The event is REFLECTION_COMPLETE; no machine applies
    it (the supervisor writes the reflection and the memories, and records it in the task's history)."""
    reflector = processors.post_reflector or OfflinePostReflector()
    return StageOutcome(EventType.REFLECTION_COMPLETE, {"post_reflection": _dump(reflector.run(context))})


_LLM_HANDLERS: dict[str, Callable[[Processors, TaskContext], StageOutcome]] = {
    StageName.PERCEIVE: _perceive, StageName.THINK: _think, StageName.PLAN: _plan, StageName.REASON: _reason,
    StageName.REFLECT: _reflect, StageName.POST_REFLECT: _post_reflect,
}


def _step(context: TaskContext, step_index: int | None) -> PlanStep:
    if context.plan is None:
        raise StageError(StageName.ACT, "the task has no plan")
    if step_index is None:
        step = context.plan.current_step
        if step is None:
            raise StageError(StageName.ACT, "every step of the plan is done")
        return step
    for step in context.plan.steps:
        if step.index == step_index:
            return step
    raise StageError(StageName.ACT, f"the plan has no step {step_index}")


def _act(processors: Processors, context: TaskContext, machine: str, step_index: int | None) -> StageOutcome:
    step = _step(context, step_index)
    try:
        result = processors.step_runner.run_step(context, step)
    except Exception as exc:  # the step failed: an outcome for the task to judge, not a crash
        tool, args = step.action_params.get("tool"), step.action_params.get("args")
        result = ActionResult(step_index=step.index, action_type=step.action_type,
                              tool=None if tool is None else str(tool),
                              params=jsonable(args) if isinstance(args, dict) else {},
                              success=False, error=f"{type(exc).__name__}: {exc}")
    payload: dict[str, Any] = {"result": _dump(result)}
    if step.action_type == "respond" and result.success:
        payload["final_result"] = jsonable(result.output)
    if machine == MachineName.REASON_ACT and step.action_type in ("respond", "generate"):
        event = EventType.STEP_COMPLETED
    else:
        event = EventType.TOOL_CALL_COMPLETED if result.success else EventType.TOOL_CALL_FAILED
    return StageOutcome(event, payload)


def run_stage(processors: Processors, stage: str, context: TaskContext, *, machine: str,
              step_index: int | None = None) -> StageOutcome:
    """Run ``stage`` of a task whose context is ``context`` on ``machine`` (classic or reason_act).

    perceive -> PERCEIVE_DONE; think -> THINK_DONE or NEED_MORE_INFO; plan -> PLAN_DONE; reason ->
    REASON_DONE or NEED_MORE_INFO; reflect -> REFLECT_DONE; act (step ``step_index``, default the plan's
    current one) -> TOOL_CALL_COMPLETED / TOOL_CALL_FAILED, or STEP_COMPLETED for a respond or generate step
    on reason_act.  ValueError for an unknown stage or machine; StageError when an llm-stage processor
    raises or there is no step to act on.
    """
    pool = pool_for(stage)
    if machine not in MACHINES:
        raise ValueError(f"unknown cognitive machine {machine!r}; machines are {', '.join(MACHINES)}")
    if pool == PoolName.TOOL:
        return _act(processors, context, machine, step_index)
    try:
        with metering() as meter, noting() as notes:
            outcome = _LLM_HANDLERS[stage](processors, context)
        return replace(outcome, usage=meter.as_dict(), context=notes or None)
    except StageError:
        raise
    except Exception as exc:  # the processor's failure, reported with the stage it happened in
        raise StageError(stage, f"{type(exc).__name__}: {exc}") from exc
