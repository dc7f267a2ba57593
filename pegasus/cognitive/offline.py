"""The offline processors: deterministic, no network, and useful on plain requests.

They understand a small English grammar of tool requests (pegasus.cognitive.grammar: arithmetic,
directories, files, counts, echo, sleep, ``call TOOL {json}``), plan one tool call per request plus
a final ``respond`` step, run the calls through a ToolRegistry and answer from the results.  Same
input, same outcome: no clock but the step timer (a parameter), no randomness.  Stateless, as seed
004 asks: each processor reads only what it is given of the TaskContext.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pegasus.cognitive.base import INTERRUPTED, NEED_MORE_INFO, QUESTION, jsonable, needs_more_info, plan_results
from pegasus.cognitive.grammar import SUB_TASK, perceive_text
from pegasus.cognitive.remember import MEMORY_WRITE, answering_fact, earlier_episode, remembered
from pegasus.task.models import ActionResult, Plan, PlanStep, Reflection, TaskContext
from pegasus.tools.builtin import default_registry
from pegasus.tools.registry import ToolContext, ToolError, ToolOutcomeUnknown, ToolRefused, ToolRegistry
from pegasus.tools.workspace import LOCAL

FROM_MEMORY = "from_memory"  # reasoning key: the recalled fact that answers the request
DONE_BEFORE = "done_before"  # reasoning key: the recalled episode of the same request (shown in the stage's history)
MAX_ATTEMPTS = 2  # a failed tool call is tried once more (the failure may be transient)
MAX_INTENTS = 50  # per task: a longer plan is a pasted document, not a request
MAX_PARALLEL = 1000  # sub-tasks of one ``in parallel``: [subtasks] max_children refuses those past it
EXAMPLES = ("what is 2 + 3 * 4?", "count the lines in README.md", "list ./src", "read setup.cfg",
            "echo hello", "sleep 0.5")


def _texts(context: TaskContext) -> list[tuple[str, str]]:
    texts = [("input", context.input_text)]
    texts += [(f"message {n}", str(m.get("content") or "")) for n, m in enumerate(context.messages, 1)
              if m.get("role", "user") == "user"]
    return [(source, text) for source, text in texts if text.strip()]


def call_key(tool: Any, args: Any) -> str:
    """One identity for a tool call, to find its earlier results."""
    return json.dumps([tool, args], sort_keys=True, default=str)


def call_of(result: ActionResult) -> tuple[str | None, dict[str, Any]]:
    """The call a result answers: a sub-task's is its text (its params also name the child made)."""
    if result.action_type == "sub_task":
        return SUB_TASK, {"text": result.params.get("text")}
    return result.tool, dict(result.params)


REQUESTS = ("tool_call", "sub_task")  # results that answer a request of the plan


def retryable(result: ActionResult) -> bool:
    """Whether a failed call may be tried once more: not a refusal (the same call is refused again), not an
    interrupted call (it may have had its effect), not a sub-task (it had its own tries: another would be a
    new tree of tasks, multiplied at every level)."""
    return not (result.success or result.refused or result.action_type == "sub_task"
                or (result.error or "").startswith(INTERRUPTED))


# -- the processors ---------------------------------------------------------------------


class OfflinePerceiver:
    """Intents (arithmetic, list_dir, read_file, count, echo, sleep) and entities of the input and messages."""

    def run(self, context: TaskContext) -> dict[str, Any]:
        texts = _texts(context)
        intents: list[dict[str, Any]] = []
        entities: dict[str, list[Any]] = {"numbers": [], "expressions": [], "paths": [], "quoted": []}
        seen: set[str] = set()
        for source, text in texts:
            found = perceive_text(text, source)
            found["intents"] += [{"intent": "remember", "tool": MEMORY_WRITE, "args": fact.model_dump(),
                                  "text": fact.content, "source": source} for fact in remembered(text)]
            for intent in found["intents"]:
                limit = MAX_PARALLEL if intent["tool"] == SUB_TASK else MAX_INTENTS
                if call_key(intent["tool"], intent["args"]) not in seen and len(intents) < limit:
                    seen.add(call_key(intent["tool"], intent["args"]))
                    intents.append(intent)
            for kind, values in found["entities"].items():
                entities[kind] += values
        task_type = "empty" if not texts else "tool_use" if intents else "unrecognised"
        return {"task_type": task_type, "intents": intents, "entities": entities, "sources": [s for s, _ in texts]}


@dataclass(frozen=True)
class OfflineThinker:
    """Asks for more information when the request is empty or names nothing it can do."""

    perceiver: OfflinePerceiver = field(default_factory=OfflinePerceiver)

    def run(self, context: TaskContext) -> dict[str, Any]:
        reasoning = self._reason(context)
        episode = earlier_episode(context.input_text, context.recall)
        if episode is not None:  # what recall contributed: in the reasoning, not in the answer
            reasoning[DONE_BEFORE] = {"id": episode.id, "title": episode.title, "text": (episode.text.splitlines() or [""])[0]}
        return reasoning

    def _reason(self, context: TaskContext) -> dict[str, Any]:
        perception = context.perception
        if perception is None or context.messages:  # messages came after the perception
            perception = self.perceiver.run(context)
        intents = list(perception.get("intents") or [])
        if not intents and (fact := answering_fact(context.input_text, context.recall)) is not None:
            return {NEED_MORE_INFO: False, "intents": [], "approach": f"answer from memory ({fact.title})",
                    FROM_MEMORY: fact.model_dump(include={"id", "title", "text"})}
        if not intents:
            said = " / ".join(text.strip() for _, text in _texts(context))
            start = f"I could not find anything I can do in {said!r}." if said else "The request is empty."
            examples = "; ".join(repr(example) for example in EXAMPLES)
            return {NEED_MORE_INFO: True, QUESTION: f"{start} What should I do? For example: {examples}.",
                    "intents": []}
        tools = ", ".join(intent["tool"] for intent in intents)
        return {NEED_MORE_INFO: False, "intents": intents,
                "approach": f"{len(intents)} tool call(s) ({tools}), then respond with the results"}


def _tool_step(index: int, intent: dict[str, Any]) -> PlanStep:
    if intent["tool"] == SUB_TASK:  # a task of its own, run by the supervisor as a child
        return PlanStep(index=index, description=f"sub-task: {intent['args']['text']}", action_type="sub_task",
                        action_params={"text": str(intent["args"]["text"])})
    args = ", ".join(f"{key}={value!r}" for key, value in intent["args"].items())
    return PlanStep(index=index, description=f"{intent['tool']}({args})", action_type="tool_call",
                    action_params={"tool": intent["tool"], "args": dict(intent["args"])})


def _plan(context: TaskContext, intents: Iterable[dict[str, Any]], reasoning: str) -> Plan:
    steps = [_tool_step(index, intent) for index, intent in enumerate(intents)]
    steps.append(PlanStep(index=len(steps), description="respond with the results", action_type="respond"))
    goal = " / ".join(text.strip() for _, text in _texts(context))[:200] or "(empty request)"
    return Plan(goal=goal, steps=steps, reasoning=reasoning)


@dataclass(frozen=True)
class OfflinePlanner:
    """One tool_call step per intent plus ``respond``; on a replan, the failed calls again plus ``respond``."""

    thinker: OfflineThinker = field(default_factory=OfflineThinker)

    def run(self, context: TaskContext) -> Plan:
        if context.reflections and context.reflections[-1].verdict == "replan":
            # An interrupted call may have had its effect already: it is reported, never retried.
            failed = [{"tool": call_of(r)[0], "args": call_of(r)[1]} for r in plan_results(context)
                      if r.tool and retryable(r)]
            if failed:
                return _plan(context, failed, f"retry {len(failed)} failed call(s) once: a failure can be transient")
            return _plan(context, [], "nothing can be retried: respond with what happened")
        reasoning = context.reasoning if context.reasoning and not needs_more_info(context.reasoning) else None
        intents = (reasoning or self.thinker.run(context)).get("intents") or []
        return _plan(context, intents, f"{len(intents)} tool call(s), then respond")


def _number(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.12g}"
    return str(value)


def _subject(tool: str | None, params: dict[str, Any]) -> str:
    if "path" in params and params["path"] is not None:
        return str(params["path"])
    if "text" in params and params["text"] is not None:
        text = str(params["text"])
        return repr(text if len(text) <= 40 else text[:37] + "...")
    return str(params.get("expression") or params.get("seconds") or "")


def _about(tool: str | None, params: dict[str, Any]) -> str:
    """The tool and what it was called on, naming the tool once (``time.get_current_time``, not twice)."""
    subject = _subject(tool, params)
    return f"{tool} {subject}" if subject else str(tool)


def _describe(result: ActionResult) -> str:
    """One answer line for a successful tool call."""
    tool, params, out = result.tool, result.params, result.output
    if result.action_type == "sub_task":
        said = str(out)
        return f"{params.get('text')}:{chr(10) if chr(10) in said else ' '}{said}"
    if isinstance(out, str) and tool not in ("read_file", "echo", "arithmetic"):
        return f"{_about(tool, params)}: {out}"  # output cut by the registry: shown as text
    if tool == "arithmetic":
        return f"{params.get('expression')} = {_number(out)}"
    if tool == "count" and isinstance(out, dict):
        names = {"lines": "line", "words": "word", "chars": "character"}
        parts = [f"{n} {names.get(unit, unit)}{'' if n == 1 else 's'}" for unit, n in out.items()]
        return f"{_subject(tool, params)}: {', '.join(parts)}"
    if tool == "list_dir" and isinstance(out, dict):
        entries, total = list(out.get("entries") or []), out.get("total", 0)
        more = f", ... ({total - len(entries)} more)" if total > len(entries) else ""
        return f"{params.get('path', '.')} is empty" if not total else (
            f"{params.get('path', '.')} has {total} entr{'y' if total == 1 else 'ies'}: {', '.join(entries)}{more}")
    if tool == "read_file":
        return f"{params.get('path')}:\n{out}"
    if tool == "echo":
        return str(out)
    if tool == "sleep":
        return f"Slept {_number(params.get('seconds'))} s."
    if tool == MEMORY_WRITE:
        return f"Remembered ({params.get('path')}): {params.get('content')}"
    return f"{tool}: {json.dumps(out, default=str)}"


def _unprefixed(error: str | None, tool: str | None) -> str:
    """A tool error without the tool's name in front (the line names it already)."""
    text = error or ""
    for prefix in (f"{tool}: ", f"{tool} failed: "):
        if tool and text.startswith(prefix):
            return text[len(prefix):]
    return text


_VERBS = {"read_file": "read", "list_dir": "list", "count": "count", "arithmetic": "compute",
          "echo": "echo", "sleep": "sleep for"}


def compose_answer(context: TaskContext) -> str:
    """The final answer: from memory when a recalled fact answers the request, else from every tool
    result so far (the latest of each call, failures explained).  Only the answer: an episode of the
    same request recalled is named in the reasoning (``DONE_BEFORE``), never here, where the next
    episode would carry it on and nest it at every run."""
    lines = []
    fact = (context.reasoning or {}).get(FROM_MEMORY)
    if isinstance(fact, dict):
        lines.append(f"From memory ({fact.get('title')}): {fact.get('text')}")
    results = _results_answer(context)
    if results or not lines:
        lines.append(results or "There was nothing to do.")
    return "\n".join(lines)


def _results_answer(context: TaskContext) -> str:
    """The answer lines of the tool results ('' when there is none)."""
    latest: dict[str, ActionResult] = {}
    attempts: dict[str, int] = {}
    for result in context.actions_done:
        if result.action_type in REQUESTS:
            key = call_key(*call_of(result))
            latest.pop(key, None)  # re-insert: the answer lists calls in the order of their last result
            latest[key], attempts[key] = result, attempts.get(key, 0) + 1
    if not latest:
        return ""
    lines, failures = [], 0
    for key, result in latest.items():
        tries = attempts[key]
        if result.success:
            lines.append(_describe(result) + (f" (succeeded on attempt {tries})" if tries > 1 else ""))
        else:
            failures += 1
            subject = _subject(result.tool, result.params)
            what = (f"{_VERBS[str(result.tool)]} {subject}" if str(result.tool) in _VERBS
                    else f"run {result.tool} on {subject}" if subject else f"run {result.tool}")
            after = f" (tried {tries} times)" if tries > 1 else ""
            lines.append(f"Could not {what}{after}: {_unprefixed(result.error, result.tool)}")
    if failures:
        lines.append(f"{failures} of {len(latest)} request(s) failed.")
    return "\n".join(lines)


@dataclass(frozen=True)
class OfflineStepRunner:
    """Runs tool_call steps through the registry; respond/generate steps compose the answer."""

    tools: ToolRegistry = field(default_factory=default_registry)
    timer: Callable[[], float] = time.perf_counter

    def run_step(self, context: TaskContext, step: PlanStep) -> ActionResult:
        started = self.timer()
        params = step.action_params
        tool, args = params.get("tool"), params.get("args", {})
        key = params.get("idempotency_key")
        output: Any = None
        error: str | None = None
        refused = False
        before = _refused_before(context, tool, args) if step.action_type == "tool_call" else None
        if before is not None:  # a model planned it again: refused again, without calling
            error, refused = f"{before.error} (refused before: not tried again)", True
        elif step.action_type == "tool_call":
            workspace = context.input_metadata.get("workspace")  # none: the configured workspace root
            local = context.input_metadata.get(LOCAL) is True  # set by the supervisor alone
            try:
                output = self.tools.call(str(tool), args,
                                         ToolContext(Path(str(workspace)) if workspace else None, key, local))
            except ToolOutcomeUnknown as exc:  # it may have had its effect: never run again
                error = f"{INTERRUPTED} ({exc.message})"
            except ToolRefused as exc:  # the same call is refused again: never retried
                error, refused = exc.message, True
            except ToolError as exc:
                error = exc.message
        elif step.action_type in ("respond", "generate"):
            output = compose_answer(context)
        else:
            error = f"{step.action_type} steps are not supported by the offline processors"
        return ActionResult(step_index=step.index, action_type=step.action_type,
                            tool=str(tool) if tool is not None else None,
                            params=dict(args) if isinstance(args, dict) else {}, success=error is None,
                            output=jsonable(output), error=error,
                            duration_ms=round((self.timer() - started) * 1000.0, 3), idempotency_key=key,
                            refused=refused)


def _refused_before(context: TaskContext, tool: Any, args: Any) -> ActionResult | None:
    """The refusal of this very call earlier in the task (a refusal is deterministic: the same call again is
    refused again), or None."""
    return next((r for r in context.actions_done if r.refused and r.action_type == "tool_call" and r.tool == tool
                 and r.params == args), None)


class OfflineReflector:
    """complete when every step succeeded; replan once after a failure that can be retried; then stop.

    "complete" ends the loop; over a failed or interrupted step the reflect stage
    turns it into a failure (``failed_steps``: exit_reason retry_exhausted or
    unknown), so such a task never ends done.
    """

    def run(self, context: TaskContext) -> Reflection:
        results = plan_results(context)
        failed = [r for r in results if not r.success]
        if not failed:
            return Reflection(verdict="complete", assessment=f"all {len(results)} step(s) succeeded")
        problems = [f"{_about(r.tool or r.action_type, r.params)}: {_unprefixed(r.error, r.tool)}" for r in failed]
        again = [r for r in failed if retryable(r)]
        if again and not any(reflection.verdict == "replan" for reflection in context.reflections):
            return Reflection(verdict="replan", assessment=f"{len(failed)} step(s) failed: " + "; ".join(problems),
                              next_focus="retry the failed step(s) once; the failure may be transient")
        why = ("still failed after a retry" if again else "were refused (never retried)" if all(r.refused for r in failed)
               else "were interrupted (never repeated)" if all((r.error or "").startswith(INTERRUPTED) for r in failed)
               else "cannot be retried (refused, interrupted, or sub-tasks that ended)")
        return Reflection(verdict="complete", assessment=f"gave up: {len(failed)} step(s) {why}: " + "; ".join(problems),
                          lessons=[f"{problem} (gave up)" for problem in problems])


@dataclass(frozen=True)
class OfflineReasoner:
    """reason_act: tool calls not yet done (or failed once) plus respond; once all are done, respond only.

    Seed 001 sends a finished plan with tool_call steps back to REASONING, so the
    plan that follows the results must hold only a respond step: that plan ends
    the task.  Each call is tried at most MAX_ATTEMPTS times, so a task always ends.
    """

    thinker: OfflineThinker = field(default_factory=OfflineThinker)

    def run(self, context: TaskContext) -> tuple[dict[str, Any], Plan | None]:
        reasoning = self.thinker.run(context)
        if needs_more_info(reasoning):
            return reasoning, None
        tries: dict[str, list[bool]] = {}
        settled: set[str] = set()  # failures never retried: refused, interrupted, a sub-task's end
        for result in context.actions_done:
            if result.action_type in REQUESTS:
                key = call_key(*call_of(result))
                tries.setdefault(key, []).append(result.success)
                if not result.success and not retryable(result):
                    settled.add(key)

        def pending(intent: dict[str, Any]) -> bool:  # never succeeded, and tried fewer than MAX_ATTEMPTS times
            key = call_key(intent["tool"], intent["args"])
            outcomes = tries.get(key, [])
            return key not in settled and not any(outcomes) and len(outcomes) < MAX_ATTEMPTS

        todo = [intent for intent in reasoning["intents"] if pending(intent)]
        if todo:
            approach = f"{len(todo)} tool call(s) ({', '.join(i['tool'] for i in todo)}), then respond"
        else:
            approach = "every tool call has a result: respond"
        return {**reasoning, "approach": approach}, _plan(context, todo, approach)
