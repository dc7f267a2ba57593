"""The three machines of the seeds, as data: ``classic`` (seed 000), ``reason_act``
(seed 001) and ``lifecycle`` (seed 002).  ``get(name)`` returns one.

Each table below is the seed's table row for row; the comments name the seed's
wording where a rule is not a plain row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pegasus.task.engine import Dynamic, EntryGate, Machine, Special, Static, build_machine
from pegasus.task.errors import StateEntryGateError, UnknownMachineError
from pegasus.task.events import Event, EventType as E
from pegasus.task.models import ActionResult, Plan, Reflection, TaskContext

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
    text = event.payload.get("message") or event.payload.get("text")
    if text:
        ctx.messages.append({"role": "user", "content": str(text)})


def _suspended(ctx: TaskContext, event: Event) -> None:
    ctx.suspend_reason = str(event.payload.get("reason") or "suspended by request")


def _failed(ctx: TaskContext, event: Event) -> None:
    ctx.error = str(event.payload.get("error") or event.payload.get("exit_reason") or "failed")
    # A stage that gives up (a failed tool step) carries its reflection and the answer so far.
    if "reflection" in event.payload:
        ctx.reflections.append(Reflection.model_validate(event.payload["reflection"]))
    _set_final_result(ctx, event)


COGNITIVE_REDUCERS = {
    E.PERCEIVE_DONE: _perceived,
    E.THINK_DONE: _reasoned,
    E.PLAN_DONE: _reasoned,
    E.REASON_DONE: _reasoned,
    E.NEED_MORE_INFO: _need_more_info,
    E.TOOL_CALL_COMPLETED: _step_done,
    E.TOOL_CALL_FAILED: _step_done,
    E.STEP_COMPLETED: _step_done,
    E.ACT_DONE: _set_final_result,
    E.REFLECT_DONE: _reflected,
    E.MESSAGE_RECEIVED: _message,
    E.TASK_RESUMED: _message,
    E.TASK_SUSPENDED: _suspended,
    E.TASK_FAILED: _failed,
}

# -- guards ----------------------------------------------------------------------


def _resume_target(ctx: TaskContext, event: Event) -> str:
    """SUSPENDED + TASK_RESUMED: back to the state held before the suspension."""
    return ctx.suspended_state or ""


def _classic_after_step(ctx: TaskContext, event: Event) -> str:
    """Seed 000: plan has more steps -> acting; otherwise -> reflecting."""
    return "acting" if ctx.plan is not None and ctx.plan.has_more_steps else "reflecting"


_VERDICT_TARGET = {"complete": "completed", "continue": "thinking", "replan": "planning"}


def _verdict_target(ctx: TaskContext, event: Event) -> str:
    """Seed 000: verdict complete -> completed, continue -> thinking, replan -> planning."""
    verdict = event.payload.get("verdict")
    if verdict is None and ctx.reflections:
        verdict = ctx.reflections[-1].verdict
    return _VERDICT_TARGET.get(str(verdict), f"<no such verdict {verdict!r}>")


def _reason_act_after_step(ctx: TaskContext, event: Event) -> str:
    """Seed 001: more steps -> acting; else any tool_call step -> reasoning, only respond -> completed."""
    if ctx.plan is not None and ctx.plan.has_more_steps:
        return "acting"
    return "reasoning" if ctx.plan is not None and ctx.plan.has_tool_calls else "completed"


CLASSIC_ACTIVE = ("perceiving", "thinking", "planning", "acting", "reflecting")

CLASSIC = build_machine(
    "classic",
    description="Perceive / Think / Plan / Act / Reflect (seed 000, with 003 and 004)",
    states=("idle", *CLASSIC_ACTIVE, "suspended", "completed", "failed"),
    initial="idle",
    terminal=("completed", "failed"),
    active=CLASSIC_ACTIVE,
    suspended="suspended",
    rows=(
        Static("idle", E.TASK_CREATED, "perceiving"),
        Static("perceiving", E.PERCEIVE_DONE, "thinking"),
        Static("thinking", E.THINK_DONE, "planning"),
        Static("thinking", E.NEED_MORE_INFO, "suspended"),
        Static("planning", E.PLAN_DONE, "acting"),
        Static("acting", E.ACT_DONE, "reflecting"),
        Static("suspended", E.MESSAGE_RECEIVED, "thinking"),
        Dynamic("acting", E.TOOL_CALL_COMPLETED, _classic_after_step,
                frozenset({"acting", "reflecting"}), "more steps -> acting, else reflecting"),
        Dynamic("acting", E.TOOL_CALL_FAILED, _classic_after_step,
                frozenset({"acting", "reflecting"}), "more steps -> acting, else reflecting"),
        Dynamic("reflecting", E.REFLECT_DONE, _verdict_target,
                frozenset(_VERDICT_TARGET.values()), "verdict must be complete, continue or replan"),
        Dynamic("suspended", E.TASK_RESUMED, _resume_target,
                frozenset(CLASSIC_ACTIVE), "resume restores the pre-suspend state"),
    ),
    specials=(
        Special(E.TASK_SUSPENDED, "suspended", "active"),
        Special(E.TASK_FAILED, "failed", "non_terminal"),
    ),
    reducers=COGNITIVE_REDUCERS,
)

REASON_ACT = build_machine(
    "reason_act",
    description="Reason / Act with completion routing by plan step types (seed 001)",
    states=("idle", "reasoning", "acting", "suspended", "completed", "failed"),
    initial="idle",
    terminal=("completed", "failed"),
    active=("reasoning", "acting"),
    suspended="suspended",
    rows=(
        Static("idle", E.TASK_CREATED, "reasoning"),
        Static("reasoning", E.REASON_DONE, "acting"),
        Static("reasoning", E.NEED_MORE_INFO, "suspended"),
        Static("suspended", E.MESSAGE_RECEIVED, "reasoning"),
        *(
            Dynamic("acting", event, _reason_act_after_step,
                    frozenset({"acting", "reasoning", "completed"}),
                    "more steps -> acting; else tool_call steps -> reasoning, only respond -> completed")
            for event in (E.TOOL_CALL_COMPLETED, E.TOOL_CALL_FAILED, E.STEP_COMPLETED)
        ),
        Dynamic("suspended", E.TASK_RESUMED, _resume_target,
                frozenset({"reasoning", "acting"}), "resume restores the pre-suspend state"),
    ),
    specials=(
        Special(E.TASK_SUSPENDED, "suspended", "active"),
        Special(E.TASK_FAILED, "failed", "non_terminal"),
    ),
    reducers=COGNITIVE_REDUCERS,
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
            "lifecycle", from_state, event.type,
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


LIFECYCLE_TERMINAL = ("done", "failed", "canceled", "blocked")

LIFECYCLE = build_machine(
    "lifecycle",
    description="Governed lifecycle, transition points T1-T20 (seed 002)",
    states=("draft", "approved", "queued", "running", "verifying", "verified", *LIFECYCLE_TERMINAL),
    initial="draft",
    terminal=LIFECYCLE_TERMINAL,
    active=("queued", "running", "verifying"),
    same_state_is_noop=True,
    rows=(
        Static("draft", E.TASK_APPROVED, "approved"),          # T1
        Static("draft", E.TASK_CANCELED, "canceled"),          # T2
        Static("approved", E.TASK_QUEUED, "queued"),           # T3
        Static("approved", E.TASK_CANCELED, "canceled"),       # T4
        Static("queued", E.TASK_STARTED, "running"),           # T5
        Static("queued", E.TASK_CANCELED, "canceled"),         # T6
        Static("running", E.EXECUTION_COMPLETED, "verifying"),  # T7
        Static("running", E.TASK_FAILED, "failed"),            # T8
        Static("running", E.TASK_CANCELED, "canceled"),        # T9
        Static("running", E.TASK_BLOCKED, "blocked"),          # T10
        Static("verifying", E.TASK_VERIFIED, "verified"),      # T11
        Static("verifying", E.TASK_FAILED, "failed"),          # T12
        Static("verifying", E.TASK_CANCELED, "canceled"),      # T13
        Static("verifying", E.GATE_FAILED, "queued"),          # T14
        Static("verified", E.TASK_DONE, "done"),               # T15
        Static("failed", E.TASK_RETRIED, "queued"),            # T16
        Static("blocked", E.TASK_UNBLOCKED, "queued"),         # T17
        Static("blocked", E.TASK_CANCELED, "canceled"),        # T18
        Static("running", E.TASK_STARTED, "running"),          # T19 (no-op)
        Static("queued", E.TASK_QUEUED, "queued"),             # T20 (no-op)
    ),
    entry_gates={
        "failed": EntryGate(_gate_failed_state, "needs exit_reason from the seed's list"),
        "canceled": EntryGate(_gate_canceled_state, "fills cleanup_summary when missing"),
        "done": EntryGate(_gate_done_state, "audit count >= 2 (warning mode)"),
    },
)

MACHINES: dict[str, Machine] = {m.name: m for m in (CLASSIC, REASON_ACT, LIFECYCLE)}
COGNITIVE_MACHINES = ("classic", "reason_act")


def get(name: str) -> Machine:
    """The machine called ``name``: classic, reason_act or lifecycle."""
    try:
        return MACHINES[name]
    except KeyError:
        raise UnknownMachineError(name, list(MACHINES)) from None


def names() -> list[str]:
    return list(MACHINES)
