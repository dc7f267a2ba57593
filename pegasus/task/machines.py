"""The three machines of the seeds, as data: ``classic`` (seed 000), ``reason_act``
(seed 001) and ``lifecycle`` (seed 002).  ``get(name)`` returns one.

Each table below is the seed's table row for row; the comments name the seed's
wording where a rule is not a plain row.  A cognitive machine also says what each
of its states runs, on which pool (seed 003's dispatch), and what ends ACTING
when the plan has no step left; ``STAGE_POOLS`` (which pool runs a stage) is
derived from those declarations and checked here, at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from pegasus.task.engine import Dynamic, EntryGate, InPlace, Machine, Runs, Special, Static, build_machine
from pegasus.task.errors import MachineDefinitionError, StateEntryGateError, UnknownMachineError
from pegasus.task.events import Event, EventType as E
from pegasus.task.models import ActionResult, Plan, Reflection, TaskContext
from pegasus.task.names import (
    CognitiveMachineName, CognitiveState as S, LifecycleState as L, MachineName, PoolName, StageName,
)

# -- payload reducers shared by the cognitive machines ------------------------------
# The event that reports a stage's result carries it in its payload; the machine
# folds it into a copy of the context before the guards run, so replaying the
# events reproduces the context, the state and the history.


def _set_final_result(ctx: TaskContext, event: Event) -> None:
    if "final_result" in event.payload:
        ctx.final_result = event.payload["final_result"]


def _perceived(ctx: TaskContext, event: Event) -> None:
    if "perception" in event.payload:
        ctx.perception = dict(event.payload["perception"])


def _reasoned(ctx: TaskContext, event: Event) -> None:
    if "reasoning" in event.payload:
        ctx.reasoning = dict(event.payload["reasoning"])
    if "plan" in event.payload:
        ctx.plan = Plan.model_validate(event.payload["plan"])


def _need_more_info(ctx: TaskContext, event: Event) -> None:
    _reasoned(ctx, event)
    ctx.suspend_reason = str(event.payload.get("question") or event.payload.get("reason") or "need more information")


def _step_done(ctx: TaskContext, event: Event) -> None:
    if "result" in event.payload:
        result = ActionResult.model_validate(event.payload["result"])
        ctx.actions_done.append(result)
        if ctx.plan is not None and any(s.index == result.step_index for s in ctx.plan.steps):
            ctx.plan.mark_done(result.step_index)
    _set_final_result(ctx, event)


def _reflected(ctx: TaskContext, event: Event) -> None:
    if "reflection" in event.payload:
        reflection = Reflection.model_validate(event.payload["reflection"])
        ctx.reflections.append(reflection)
        if reflection.verdict != "complete":
            ctx.iteration += 1
    _set_final_result(ctx, event)


def _message(ctx: TaskContext, event: Event) -> None:
    texts = event.payload.get("messages") or [event.payload.get("message") or event.payload.get("text")]
    for text in texts:
        if text:
            ctx.messages.append({"role": "user", "content": str(text)})
    if "through" in event.payload:  # messages numbered by the supervisor (pegasus.admission.messages)
        ctx.messages_taken = max(ctx.messages_taken, int(event.payload["through"]))


def _suspended(ctx: TaskContext, event: Event) -> None:
    ctx.suspend_reason = str(event.payload.get("reason") or "suspended by request")


def _failed(ctx: TaskContext, event: Event) -> None:
    ctx.error = str(event.payload.get("error") or event.payload.get("exit_reason") or "failed")
    # A stage that gives up (a failed tool step) carries its reflection and the answer so far.
    if "reflection" in event.payload:
        ctx.reflections.append(Reflection.model_validate(event.payload["reflection"]))
    _set_final_result(ctx, event)


# Each names the fields it changes in place (it may assign any other): the FSM copies only those for it.
_ASSIGNS: frozenset[str] = frozenset()
_STEP, _REFLECTIONS = frozenset({"actions_done", "plan"}), frozenset({"reflections"})
COGNITIVE_REDUCERS = {
    E.PERCEIVE_DONE: InPlace(_perceived, _ASSIGNS),
    E.THINK_DONE: InPlace(_reasoned, _ASSIGNS),
    E.PLAN_DONE: InPlace(_reasoned, _ASSIGNS),
    E.REASON_DONE: InPlace(_reasoned, _ASSIGNS),
    E.NEED_MORE_INFO: InPlace(_need_more_info, _ASSIGNS),
    E.TOOL_CALL_COMPLETED: InPlace(_step_done, _STEP),
    E.TOOL_CALL_FAILED: InPlace(_step_done, _STEP),
    E.STEP_COMPLETED: InPlace(_step_done, _STEP),
    E.ACT_DONE: InPlace(_set_final_result, _ASSIGNS),
    E.REFLECT_DONE: InPlace(_reflected, _REFLECTIONS),
    E.MESSAGE_RECEIVED: InPlace(_message, frozenset({"messages"})),
    E.TASK_RESUMED: InPlace(_message, frozenset({"messages"})),
    E.TASK_SUSPENDED: InPlace(_suspended, _ASSIGNS),
    E.TASK_FAILED: InPlace(_failed, _REFLECTIONS),
}

# -- guards ----------------------------------------------------------------------


def _resume_target(ctx: TaskContext, event: Event) -> str:
    """SUSPENDED + TASK_RESUMED: back to the state held before the suspension."""
    return ctx.suspended_state or ""


def _classic_after_step(ctx: TaskContext, event: Event) -> str:
    """Seed 000: plan has more steps -> acting; otherwise -> reflecting."""
    return S.ACTING if ctx.plan is not None and ctx.plan.has_more_steps else S.REFLECTING


_VERDICT_TARGET = {"complete": S.COMPLETED, "continue": S.THINKING, "replan": S.PLANNING}


def _verdict_target(ctx: TaskContext, event: Event) -> str:
    """Seed 000: verdict complete -> completed, continue -> thinking, replan -> planning."""
    verdict = event.payload.get("verdict")
    if verdict is None and ctx.reflections:
        verdict = ctx.reflections[-1].verdict
    return _VERDICT_TARGET.get(str(verdict), f"<no such verdict {verdict!r}>")


def _reason_act_after_step(ctx: TaskContext, event: Event) -> str:
    """Seed 001: more steps -> acting; else any tool_call step -> reasoning, only respond -> completed."""
    if ctx.plan is not None and ctx.plan.has_more_steps:
        return S.ACTING
    return S.REASONING if ctx.plan is not None and ctx.plan.has_tool_calls else S.COMPLETED


CLASSIC_ACTIVE = (S.PERCEIVING, S.THINKING, S.PLANNING, S.ACTING, S.REFLECTING)

CLASSIC = build_machine(
    MachineName.CLASSIC,
    description="Perceive / Think / Plan / Act / Reflect (seed 000, with 003 and 004)",
    states=(S.IDLE, *CLASSIC_ACTIVE, S.SUSPENDED, S.COMPLETED, S.FAILED),
    initial=S.IDLE,
    terminal=(S.COMPLETED, S.FAILED),
    active=CLASSIC_ACTIVE,
    suspended=S.SUSPENDED,
    rows=(
        Static(S.IDLE, E.TASK_CREATED, S.PERCEIVING),
        Static(S.PERCEIVING, E.PERCEIVE_DONE, S.THINKING),
        Static(S.THINKING, E.THINK_DONE, S.PLANNING),
        Static(S.THINKING, E.NEED_MORE_INFO, S.SUSPENDED),
        Static(S.PLANNING, E.PLAN_DONE, S.ACTING),
        Static(S.ACTING, E.ACT_DONE, S.REFLECTING),
        Static(S.SUSPENDED, E.MESSAGE_RECEIVED, S.THINKING),
        Dynamic(S.ACTING, E.TOOL_CALL_COMPLETED, _classic_after_step,
                frozenset({S.ACTING, S.REFLECTING}), "more steps -> acting, else reflecting"),
        Dynamic(S.ACTING, E.TOOL_CALL_FAILED, _classic_after_step,
                frozenset({S.ACTING, S.REFLECTING}), "more steps -> acting, else reflecting"),
        Dynamic(S.REFLECTING, E.REFLECT_DONE, _verdict_target,
                frozenset(_VERDICT_TARGET.values()), "verdict must be complete, continue or replan"),
        Dynamic(S.SUSPENDED, E.TASK_RESUMED, _resume_target,
                frozenset(CLASSIC_ACTIVE), "resume restores the pre-suspend state"),
    ),
    specials=(
        Special(E.TASK_SUSPENDED, S.SUSPENDED, "active"),
        Special(E.TASK_FAILED, S.FAILED, "non_terminal"),
    ),
    reducers=COGNITIVE_REDUCERS,
    raises={S.IDLE: E.TASK_CREATED},  # seed 003: a new task starts at once
    stages={
        S.PERCEIVING: Runs(StageName.PERCEIVE, PoolName.LLM),
        S.THINKING: Runs(StageName.THINK, PoolName.LLM),
        S.PLANNING: Runs(StageName.PLAN, PoolName.LLM),
        S.ACTING: Runs(StageName.ACT, PoolName.TOOL, empty_plan=E.ACT_DONE),  # seed 003: no step -> ACT_DONE
        S.REFLECTING: Runs(StageName.REFLECT, PoolName.LLM),
    },
)

REASON_ACT = build_machine(
    MachineName.REASON_ACT,
    description="Reason / Act with completion routing by plan step types (seed 001)",
    states=(S.IDLE, S.REASONING, S.ACTING, S.SUSPENDED, S.COMPLETED, S.FAILED),
    initial=S.IDLE,
    terminal=(S.COMPLETED, S.FAILED),
    active=(S.REASONING, S.ACTING),
    suspended=S.SUSPENDED,
    rows=(
        Static(S.IDLE, E.TASK_CREATED, S.REASONING),
        Static(S.REASONING, E.REASON_DONE, S.ACTING),
        Static(S.REASONING, E.NEED_MORE_INFO, S.SUSPENDED),
        Static(S.SUSPENDED, E.MESSAGE_RECEIVED, S.REASONING),
        *(
            Dynamic(S.ACTING, event, _reason_act_after_step,
                    frozenset({S.ACTING, S.REASONING, S.COMPLETED}),
                    "more steps -> acting; else tool_call steps -> reasoning, only respond -> completed")
            for event in (E.TOOL_CALL_COMPLETED, E.TOOL_CALL_FAILED, E.STEP_COMPLETED)
        ),
        Dynamic(S.SUSPENDED, E.TASK_RESUMED, _resume_target,
                frozenset({S.REASONING, S.ACTING}), "resume restores the pre-suspend state"),
    ),
    specials=(
        Special(E.TASK_SUSPENDED, S.SUSPENDED, "active"),
        Special(E.TASK_FAILED, S.FAILED, "non_terminal"),
    ),
    reducers=COGNITIVE_REDUCERS,
    raises={S.IDLE: E.TASK_CREATED},
    stages={
        S.REASONING: Runs(StageName.REASON, PoolName.LLM),
        # Seed 001: an empty plan routes like a finished one (STEP_COMPLETED's guard).
        S.ACTING: Runs(StageName.ACT, PoolName.TOOL, empty_plan=E.STEP_COMPLETED),
    },
)

# -- lifecycle (seed 002) ------------------------------------------------------------

EXIT_REASONS = frozenset({
    "timeout", "retry_exhausted", "canceled", "exception", "gate_failed",
    "user_stopped", "fatal_error", "max_iterations", "blocked", "unknown",
})
MIN_AUDIT_EVENTS_FOR_DONE = 2  # the creation event and at least one transition


def _gate_failed_state(from_state: str, event: Event, metadata: Mapping[str, Any], audits: int) -> dict[str, Any]:
    """Gate 2: entering failed needs an exit_reason from the seed's list."""
    reason = event.payload.get("exit_reason")
    if reason not in EXIT_REASONS:
        raise StateEntryGateError(
            MachineName.LIFECYCLE, from_state, event.type,
            f"entering failed needs exit_reason in {sorted(EXIT_REASONS)}, got {reason!r}",
        )
    return {"exit_reason": reason}


def _gate_canceled_state(from_state: str, event: Event, metadata: Mapping[str, Any], audits: int) -> dict[str, Any]:
    """Gate 3: entering canceled fills a minimal cleanup_summary when missing."""
    summary = event.payload.get("cleanup_summary") or metadata.get("cleanup_summary")
    if not summary:
        summary = {"auto": True, "canceled_from": from_state,
                   "reason": str(event.payload.get("reason") or "canceled")}
    return {"cleanup_summary": summary}


def _gate_done_state(from_state: str, event: Event, metadata: Mapping[str, Any], audits: int) -> dict[str, Any]:
    """Gate 1: entering done checks the audit count, in warning mode (never refuses)."""
    if audits >= MIN_AUDIT_EVENTS_FOR_DONE:
        return {}
    warning = f"done with {audits} audit event(s); at least {MIN_AUDIT_EVENTS_FOR_DONE} expected"
    return {"warnings": [*metadata.get("warnings", []), warning]}


LIFECYCLE_TERMINAL = (L.DONE, L.FAILED, L.CANCELED, L.BLOCKED)

LIFECYCLE = build_machine(
    MachineName.LIFECYCLE,
    description="Governed lifecycle, transition points T1-T20 (seed 002)",
    states=(L.DRAFT, L.APPROVED, L.QUEUED, L.RUNNING, L.VERIFYING, L.VERIFIED, *LIFECYCLE_TERMINAL),
    initial=L.DRAFT,
    terminal=LIFECYCLE_TERMINAL,
    active=(L.QUEUED, L.RUNNING, L.VERIFYING),
    same_state_is_noop=True,
    rows=(
        Static(L.DRAFT, E.TASK_APPROVED, L.APPROVED),            # T1
        Static(L.DRAFT, E.TASK_CANCELED, L.CANCELED),            # T2
        Static(L.APPROVED, E.TASK_QUEUED, L.QUEUED),             # T3
        Static(L.APPROVED, E.TASK_CANCELED, L.CANCELED),         # T4
        Static(L.QUEUED, E.TASK_STARTED, L.RUNNING),             # T5
        Static(L.QUEUED, E.TASK_CANCELED, L.CANCELED),           # T6
        Static(L.RUNNING, E.EXECUTION_COMPLETED, L.VERIFYING),   # T7
        Static(L.RUNNING, E.TASK_FAILED, L.FAILED),              # T8
        Static(L.RUNNING, E.TASK_CANCELED, L.CANCELED),          # T9
        Static(L.RUNNING, E.TASK_BLOCKED, L.BLOCKED),            # T10
        Static(L.VERIFYING, E.TASK_VERIFIED, L.VERIFIED),        # T11
        Static(L.VERIFYING, E.TASK_FAILED, L.FAILED),            # T12
        Static(L.VERIFYING, E.TASK_CANCELED, L.CANCELED),        # T13
        Static(L.VERIFYING, E.GATE_FAILED, L.QUEUED),            # T14
        Static(L.VERIFIED, E.TASK_DONE, L.DONE),                 # T15
        Static(L.FAILED, E.TASK_RETRIED, L.QUEUED),              # T16
        Static(L.BLOCKED, E.TASK_UNBLOCKED, L.QUEUED),           # T17
        Static(L.BLOCKED, E.TASK_CANCELED, L.CANCELED),          # T18
        Static(L.RUNNING, E.TASK_STARTED, L.RUNNING),            # T19 (no-op)
        Static(L.QUEUED, E.TASK_QUEUED, L.QUEUED),               # T20 (no-op)
    ),
    entry_gates={
        L.FAILED: EntryGate(_gate_failed_state, "needs exit_reason from the seed's list"),
        L.CANCELED: EntryGate(_gate_canceled_state, "fills cleanup_summary when missing"),
        L.DONE: EntryGate(_gate_done_state, "audit count >= 2 (warning mode)"),
    },
)

MACHINES: dict[str, Machine] = {m.name: m for m in (CLASSIC, REASON_ACT, LIFECYCLE)}
COGNITIVE_MACHINES = (MachineName.CLASSIC, MachineName.REASON_ACT)
if set(get_args(CognitiveMachineName)) != set(COGNITIVE_MACHINES) or not all(
        MACHINES[name].stages for name in COGNITIVE_MACHINES):
    raise MachineDefinitionError(f"the cognitive machines are {COGNITIVE_MACHINES}, each with its stages; "
                                 f"CognitiveMachineName says {get_args(CognitiveMachineName)}")


def _stage_pools(machines: tuple[Machine, ...]) -> dict[str, str]:
    """Which pool runs each stage, from the machines' declarations; a stage on two pools is an error."""
    pools: dict[str, str] = {}
    for machine in machines:
        for state, runs in machine.stages.items():
            if pools.setdefault(runs.stage, runs.pool) != runs.pool:
                raise MachineDefinitionError(f"machine {machine.name!r}: stage {runs.stage!r} of state {state!r} "
                                             f"runs on {runs.pool!r}, elsewhere on {pools[runs.stage]!r}")
    return pools


STAGE_POOLS = _stage_pools((CLASSIC, REASON_ACT))


def get(name: str) -> Machine:
    """The machine called ``name``: classic, reason_act or lifecycle."""
    try:
        return MACHINES[name]
    except KeyError:
        raise UnknownMachineError(name, list(MACHINES)) from None


def names() -> list[str]:
    return list(MACHINES)
