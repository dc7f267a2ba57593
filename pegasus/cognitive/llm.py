"""The LLM-backed processors: the same interfaces as the offline set (seed 004), answered by a model.

It asks the model for each stage's structured output (JSON validated into the stage's model, native
function calls mapped to tool_call steps), feeds an invalid reply's error back once, and turns
every failure into a StageError that says what happened (``RateLimited`` with ``retry_after_s``,
``ModelTimedOut``).  A reply in prose is read as an answer, not an error, and a respond step
carries the model's text when it wrote one (docs/llm.md, "Where the answer comes from" and "A reply
in prose is an answer").  It must not import Thespian, wait for rate limits, or run tools.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from pegasus.cognitive.base import NEED_MORE_INFO, QUESTION, Processors, StageError, plan_results
from pegasus.cognitive.offline import OfflineStepRunner
from pegasus.cognitive.replies import (  # noqa: F401 - the reply shapes are imported from here too
    OUTPUT_TOKENS, InvalidReply, PerceptionReply, PlanReply, PostReflectReply, ReasonReply, ReflectReply,
    StepReply, ThinkReply, json_object, prose, stepless, validated)
from pegasus.config import DEFAULT_TIER, ModelPrice, Settings
from pegasus.llm import capabilities, cost, ladder, prompts, usage
from pegasus.llm.capabilities import Schema, Shape
from pegasus.llm.context import fit_call
from pegasus.llm.client import ChatClient, Completion, LLMError, LLMRateLimited, LLMTimeout
from pegasus.task.models import ActionResult, Plan, PlanStep, PostTaskReflection, Reflection, TaskContext
from pegasus.task.names import StageName
from pegasus.tools.registry import ToolArgumentError, ToolError, ToolNotFoundError, ToolRegistry

T = TypeVar("T")
Messages = list[dict[str, Any]] | Callable[[prompts.ToolSpecs | None], list[dict[str, Any]]]
ATTEMPTS = 2  # the first reply, and one more after its error was fed back


class ModelTimedOut(StageError):
    """The endpoint did not answer within ``llm.timeout_s`` (or what the stage's deadline left of it)."""


class RateLimited(StageError):
    """The endpoint answered 429; ``retry_after_s`` is its Retry-After (or None): the pool decides."""

    def __init__(self, stage: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(stage, message)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.stage, self.message, self.retry_after_s))


@functools.cache
def _schema(model: type[BaseModel]) -> Schema:
    return capabilities.reply_schema(model.__name__, model.model_json_schema())


def _as_text(reply: Completion) -> str:
    """The reply as the model is shown it again after an error (tool calls written out)."""
    calls = [{"tool": call.name, "arguments": call.arguments} for call in reply.tool_calls]
    return (reply.content or "") + (f"\n(function calls: {json.dumps(calls)})" if calls else "")


# -- the model caller shared by the processors -------------------------------------------------------


@dataclass(frozen=True)
class ModelCaller:
    client: ChatClient  # on its tier's settings (model, endpoint, window)
    tools: ToolRegistry
    tier: str = DEFAULT_TIER
    price: ModelPrice | None = None  # None: its calls have no cost

    def specs(self) -> prompts.ToolSpecs:
        return prompts.tool_specs(self.tools.describe())

    def ask(self, stage: str, messages: Messages, parse: Callable[[Completion], T], *,
            reply: type[BaseModel] | None = None, tools: prompts.ToolSpecs | None = None,
            tool_choice: str | None = None, in_prose: Callable[[str], T] | None = None,
            prose_is_final: bool | Callable[[Shape], bool] = False,
            lenient: Callable[[str | None], str | None] | None = None) -> T:
        """The parsed reply; an invalid one is retried once with its error, then StageError.

        ``reply``: the model it must fit (the ``json_schema`` rung); ``messages``: a list, or a function of the
        prompted tool specs.  A parameter the endpoint refuses is stepped down (pegasus.llm.ladder), no attempt
        spent.  ``in_prose`` reads a reply with no JSON after the retry (at once where ``prose_is_final`` says
        so of the shape: asking again would cost as long again), noted ``degraded``; ``lenient``: the words it
        reads of JSON that still does not fit (None: it fails).
        """
        schema = _schema(reply) if reply is not None else None
        fed_back: list[dict[str, Any]] = []

        def build(shape: Shape) -> list[dict[str, Any]]:
            prompted = tools if tools is not None and shape.tools == capabilities.PROMPTED else None
            native = tools.specs if tools is not None and prompted is None else ()
            built = [*(messages(prompted) if callable(messages) else messages), *fed_back]
            return fit_call(self.client.config, stage, built, native, self._text)

        for attempt in range(1, ATTEMPTS + 1):
            try:
                completion, shape = ladder.complete(self.client, build, tools=tools.specs if tools else None,
                                                tool_choice=tool_choice, schema=schema,
                                                short=OUTPUT_TOKENS.get(stage, 0))
            except LLMRateLimited as exc:
                raise _with_usage(RateLimited(stage, str(exc), exc.retry_after_s)) from None
            except LLMTimeout as exc:
                raise _with_usage(ModelTimedOut(stage, str(exc))) from None
            except LLMError as exc:
                raise _with_usage(StageError(stage, str(exc))) from None
            self._record(completion)
            try:
                return parse(completion)
            except InvalidReply as exc:
                text = prose(completion.content) if in_prose is not None and not completion.tool_calls else None
                ran_on = completion.finish_reason == "length"  # a loop to the token cap: asking again costs as much
                final = prose_is_final(shape) if callable(prose_is_final) else prose_is_final
                if text is not None and in_prose is not None and (final or attempt == ATTEMPTS or ran_on):
                    usage.degraded(f"{stage}: the reply was prose, not JSON; read as " + (
                        "its text at once (it ran to the token limit)" if ran_on and attempt < ATTEMPTS
                        else "the answer" if final else f"its text after {ATTEMPTS} replies"))
                    return in_prose(text)
                text = lenient(completion.content) if lenient is not None and not completion.tool_calls else None
                if text is not None and in_prose is not None and attempt == ATTEMPTS:
                    usage.degraded(f"{stage}: the reply's JSON did not fit ({exc}); read as its text "
                                   f"after {ATTEMPTS} replies")
                    return in_prose(text)
                if attempt == ATTEMPTS:
                    raise _with_usage(StageError(
                        stage, f"the model's reply was invalid {ATTEMPTS} times (the error was fed back): {exc}"
                    )) from None
                fed_back += [{"role": "assistant", "content": _as_text(completion)},
                             {"role": "user", "content": prompts.retry_message(str(exc))}]
        raise AssertionError("unreachable")

    def _record(self, reply: Completion) -> None:
        usage.record(reply.usage, reply.model, cost.call_cost(reply.usage, self.price),
                     None if self.tier == DEFAULT_TIER else self.tier)

    def _text(self, messages: list[dict[str, Any]]) -> str:
        """A plain-text reply (the context budget's summary); LLMError on failure."""
        reply, _ = ladder.complete(self.client, lambda shape: messages)
        self._record(reply)
        return reply.content or ""

    def tool_step(self, index: int, name: str, args: Any, description: str = "") -> PlanStep:
        """A tool_call step, its tool and arguments checked against the registry."""
        try:
            self.tools.validate(name, args)
        except (ToolNotFoundError, ToolArgumentError) as exc:
            raise InvalidReply(exc.message) from None
        except ToolError:
            pass  # the tool exists but cannot be checked now (its server is down): the act stage reports it
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return PlanStep(index=index, description=description or f"{name}({shown})", action_type="tool_call",
                        action_params={"tool": name, "args": dict(args)})


def _with_usage(error: StageError) -> StageError:
    """The error, carrying the usage of the calls made before it (the pool reconciles them too)."""
    error.usage = usage.current()  # type: ignore[attr-defined]
    return error


def _respond(index: int, text: str | None) -> PlanStep:
    text = (text or "").strip() or None
    return PlanStep(index=index, description="respond" + (f": {text[:60]}" if text else " with the results"),
                    action_type="respond", action_params={"text": text} if text else {})


def _native_steps(caller: ModelCaller, specs: prompts.ToolSpecs, reply: Completion) -> list[PlanStep]:
    steps: list[PlanStep] = []
    for call in reply.tool_calls:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            raise InvalidReply(f"the arguments of {call.name} are not valid JSON: {call.arguments[:200]!r}") from None
        if not isinstance(args, dict):
            raise InvalidReply(f"the arguments of {call.name} must be a JSON object")
        steps.append(caller.tool_step(len(steps), specs.tool_name(call.name), args))
    return steps


def _json_steps(caller: ModelCaller, specs: prompts.ToolSpecs, replies: list[StepReply]) -> list[PlanStep]:
    steps: list[PlanStep] = []
    for n, step in enumerate(replies):
        if step.action_type == "respond":
            if n != len(replies) - 1:
                raise InvalidReply("a respond step must be the last step of the plan")
            steps.append(_respond(len(steps), step.text))
        elif step.action_type == "sub_task":  # a child task, started by the supervisor (docs/subtasks.md)
            params = {"text": str(step.text), **({"machine": step.machine} if step.machine else {})}
            steps.append(PlanStep(index=len(steps), description=step.description or f"sub-task: {step.text}",
                                  action_type="sub_task", action_params=params))
        else:
            steps.append(caller.tool_step(len(steps), specs.tool_name(str(step.tool)), step.args, step.description))
    return steps


def _goal(context: TaskContext) -> str:
    return context.input_text.strip()[:200] or "(empty request)"


# -- the processors ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMPerceiver:
    caller: ModelCaller

    def run(self, context: TaskContext) -> dict[str, Any]:
        reply = self.caller.ask(StageName.PERCEIVE, prompts.perceive_messages(context),
                                lambda r: validated(PerceptionReply, json_object(r.content)), reply=PerceptionReply,
                                in_prose=lambda text: PerceptionReply(summary=text))  # the text as its summary
        return reply.model_dump(mode="json")


@dataclass(frozen=True)
class LLMThinker:
    caller: ModelCaller

    def run(self, context: TaskContext) -> dict[str, Any]:
        reply = self.caller.ask(StageName.THINK, prompts.think_messages(context, self.caller.specs()),
                                lambda r: validated(ThinkReply, json_object(r.content)), reply=ThinkReply,
                                in_prose=lambda text: ThinkReply(approach=text))  # the text as the reasoning
        return reply.model_dump(mode="json")


@dataclass(frozen=True)
class LLMPlanner:
    caller: ModelCaller
    sub_tasks: str = ""  # what the prompt says of sub_task steps (prompts.sub_task_rule)

    def run(self, context: TaskContext) -> Plan:
        specs = self.caller.specs()
        previous = plan_results(context)

        def parse(reply: Completion) -> Plan:
            if reply.tool_calls:
                steps = _native_steps(self.caller, specs, reply)
                return Plan(goal=_goal(context), steps=[*steps, _respond(len(steps), None)],
                            reasoning=(reply.content or "").strip() or f"{len(steps)} tool call(s), then respond")
            plan = validated(PlanReply, json_object(reply.content))
            steps = _json_steps(self.caller, specs, plan.steps)
            if steps[-1].action_type != "respond":
                steps.append(_respond(len(steps), None))
            return Plan(goal=plan.goal or _goal(context), steps=steps, reasoning=plan.reasoning)

        return self.caller.ask(StageName.PLAN,
                               lambda prompted: prompts.plan_messages(context, previous, prompted=prompted,
                                                                      sub_tasks=self.sub_tasks),
                               parse, reply=PlanReply, tools=specs,
                               in_prose=lambda text: Plan(goal=_goal(context), steps=[_respond(0, text)],
                                                          reasoning="the model answered in prose"),
                               lenient=stepless,  # JSON without steps: its words, as prose is read
                               # Offered the tools as functions, the model called none: its prose is the answer
                               # (asked again, SmolLM2-135M wrote prose again on 6 of 6 plans).  Prompted tools
                               # are called in JSON, so prose there is corrected once.
                               prose_is_final=lambda shape: shape.tools == capabilities.NATIVE)


@dataclass(frozen=True)
class LLMReflector:
    caller: ModelCaller

    def run(self, context: TaskContext) -> Reflection:
        reply = self.caller.ask(StageName.REFLECT, prompts.reflect_messages(context, plan_results(context)),
                                lambda r: validated(ReflectReply, json_object(r.content)), reply=ReflectReply,
                                in_prose=lambda text: ReflectReply(verdict="complete", assessment=text))
        return Reflection(**reply.model_dump())


@dataclass(frozen=True)
class LLMReasoner:
    """reason_act: think and plan in one call; tool calls in one round, the answer after their results."""

    caller: ModelCaller
    max_tool_calls: int = 20
    sub_tasks: str = ""  # what the prompt says of sub_task steps (prompts.sub_task_rule)

    def run(self, context: TaskContext) -> tuple[dict[str, Any], Plan | None]:
        specs = self.caller.specs()
        calls_so_far = sum(result.action_type == "tool_call" for result in context.actions_done)
        must_answer = calls_so_far >= self.max_tool_calls

        def parse(reply: Completion) -> tuple[dict[str, Any], Plan | None]:
            if reply.tool_calls:
                if must_answer:
                    raise InvalidReply("the tool-call budget of this task is used: answer without calling tools")
                steps = _native_steps(self.caller, specs, reply)
                thought = (reply.content or "").strip()
                return ({"thought": thought, NEED_MORE_INFO: False,
                         "approach": f"call {', '.join(str(s.action_params['tool']) for s in steps)}"},
                        Plan(goal=_goal(context), steps=steps, reasoning=thought or "call tools, then reason again"))
            answer = validated(ReasonReply, json_object(reply.content))
            reasoning = answer.model_dump(mode="json", exclude={"steps"})
            if answer.need_more_info:
                return {**reasoning, NEED_MORE_INFO: True, QUESTION: answer.question}, None
            steps = _json_steps(self.caller, specs, answer.steps)
            if must_answer and any(step.action_type == "tool_call" for step in steps):
                raise InvalidReply("the tool-call budget of this task is used: answer without calling tools")
            if answer.answer and not any(step.action_type == "respond" for step in steps):
                steps.append(_respond(len(steps), answer.answer))
            return reasoning, Plan(goal=_goal(context), steps=steps, reasoning=answer.thought)

        return self.caller.ask(StageName.REASON,
                               lambda prompted: prompts.reason_messages(context, must_answer=must_answer,
                                                                        prompted=prompted, sub_tasks=self.sub_tasks),
                               parse, reply=ReasonReply, tools=specs if specs.specs else None,
                               tool_choice="none" if must_answer and specs.specs else None,
                               in_prose=lambda text: ({"thought": "", NEED_MORE_INFO: False, "answer": text},
                                                      Plan(goal=_goal(context), steps=[_respond(0, text)],
                                                           reasoning="answered in prose")),
                               prose_is_final=True)  # ReAct: a reply without a tool call is the final answer


@dataclass(frozen=True)
class LLMPostReflector:
    """After done: the model says what to keep (facts, the episode), in PostTaskReflection's shape."""

    caller: ModelCaller

    def run(self, context: TaskContext) -> PostTaskReflection:
        reply = self.caller.ask(StageName.POST_REFLECT, prompts.post_reflect_messages(context),
                                lambda r: validated(PostReflectReply, json_object(r.content)), reply=PostReflectReply,
                                in_prose=lambda text: PostReflectReply(assessment=text))  # nothing to keep
        return PostTaskReflection(**reply.model_dump())


@dataclass(frozen=True)
class LLMStepRunner:
    """Tool steps through the registry (the offline runner); a respond step with the model's text answers it."""

    inner: OfflineStepRunner

    def run_step(self, context: TaskContext, step: PlanStep) -> ActionResult:
        text = step.action_params.get("text")
        if step.action_type in ("respond", "generate") and isinstance(text, str) and text.strip():
            return ActionResult(step_index=step.index, action_type=step.action_type, success=True, output=text)
        return self.inner.run_step(context, step)


def llm_processors(settings: Settings, tools: ToolRegistry, *, client: ChatClient | None = None,
                   tier: str | None = None, callers: dict[str, ModelCaller] | None = None) -> Processors:
    """The processors of ``[llm] provider = "openai"``: each stage asks the model of its tier
    (``tier``, a task's, else ``[llm.stages]``; ``client``, if given, serves the default tier;
    ``callers``: the callers by tier, shared with other sets)."""
    callers = callers if callers is not None else {}

    def caller(stage: str) -> ModelCaller:
        tier_name = settings.llm.tier_of(stage, tier)
        if tier_name not in callers:
            chat = client if client is not None and tier_name == DEFAULT_TIER else \
                ChatClient(settings.llm.tier(tier_name))
            callers[tier_name] = ModelCaller(chat, tools, tier_name, settings.llm.price(tier_name))
        return callers[tier_name]

    rule = prompts.sub_task_rule(settings.subtasks.max_depth, settings.subtasks.max_children)
    return Processors(
        perceiver=LLMPerceiver(caller(StageName.PERCEIVE)),
        thinker=LLMThinker(caller(StageName.THINK)),
        planner=LLMPlanner(caller(StageName.PLAN), rule),
        step_runner=LLMStepRunner(OfflineStepRunner(tools)),
        reflector=LLMReflector(caller(StageName.REFLECT)),
        reasoner=LLMReasoner(caller(StageName.REASON), settings.llm.max_tool_calls, rule),
        post_reflector=LLMPostReflector(caller(StageName.POST_REFLECT)),
    )
