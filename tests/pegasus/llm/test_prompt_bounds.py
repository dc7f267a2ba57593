"""What a stage's prompt carries is bounded (issue 30: SmolLM2 on a busy core reads a few tokens/s, and
reflect's prompt held the whole plan and every step's output twice, up to 2,690 tokens), and a stage
whose answer is short asks for few tokens.  docs/llm.md, "What a prompt carries".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings as hyp_settings, strategies as st

from pegasus.cognitive.replies import OUTPUT_TOKENS
from pegasus.cognitive.stages import processors_for, run_stage
from pegasus.config import Settings
from pegasus.llm import capabilities as cap, prompts
from pegasus.llm.capabilities import Shape
from pegasus.task.models import ActionResult, Plan, PlanStep, Reflection, TaskContext
from tests.support.fake_openai import FakeOpenAI, completion

TOOLS = prompts.tool_specs([{"name": "arithmetic", "description": "evaluate an expression", "effect": "pure",
                             "schema": {"type": "object", "properties": {"expression": {"type": "string"}}}}])
# One step's view at most: its keys and marks, a tool name, the arguments and the output (or error), each
# an excerpt with its marker.
STEP = 200 + prompts.NAME_CHARS + 2 * (prompts.EXCERPT_CHARS + 60) + len(prompts.REFUSED_NOTE)
STEPS = (prompts.STEPS_SHOWN + 1) * STEP
# What each stage may add to the request (think and plan show it whole: it is the task), or, for the
# stages that judge or recall it, its whole prompt.
ADDED = {"think": len(prompts.THINK) + len(TOOLS.lines()) + prompts.EXCERPT_CHARS + 200,
         "plan": len(prompts.PLAN) + 2 * prompts.EXCERPT_CHARS + STEPS + 300}
WHOLE = {"reflect": len(prompts.REFLECT) + prompts.REQUEST_CHARS + prompts.NAME_CHARS + STEPS + 300,
         "post_reflect": len(prompts.POST_REFLECT) + prompts.REQUEST_CHARS + prompts.ANSWER_CHARS + STEPS + 300}

# Long texts are what the bounds are for, and random text is mostly short: half the texts drawn are long.
text = st.one_of(st.text(max_size=50), st.builds(lambda c, n: c * n, st.sampled_from("x é\n\""),
                                                  st.integers(0, 8000)))
value = st.one_of(text, st.integers(), st.lists(text, max_size=5), st.dictionaries(text, text, max_size=5))


@st.composite
def contexts(draw: st.DrawFn) -> TaskContext:
    n = draw(st.integers(0, 30))
    results = [ActionResult(step_index=i, action_type=draw(st.sampled_from(["tool_call", "respond"])),
                            tool=draw(st.one_of(st.none(), text)), params=draw(st.dictionaries(text, value, max_size=4)),
                            success=(ok := draw(st.booleans())), output=draw(value) if ok else None,
                            error=None if ok else draw(text), refused=draw(st.booleans())) for i in range(n)]
    steps = [PlanStep(index=i, description=draw(text), completed=i < n) for i in range(n + draw(st.integers(0, 30)))]
    return TaskContext(input_text=draw(text), perception=draw(st.dictionaries(text, value, max_size=5)),
                       reasoning={"approach": draw(text)}, actions_done=results,
                       plan=Plan(goal=draw(text), steps=steps, reasoning=draw(text)),
                       reflections=[Reflection(verdict="replan", assessment=draw(text), lessons=draw(st.lists(text)),
                                               next_focus=draw(text))],
                       final_result=draw(value))


def _chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages)


@hyp_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(contexts())
def test_no_prompt_exceeds_its_budget_for_any_input(context: TaskContext) -> None:
    request = len(prompts.request_text(context))
    results = context.actions_done
    assert _chars(prompts.think_messages(context, TOOLS)) <= request + ADDED["think"]
    assert _chars(prompts.plan_messages(context, results)) <= request + ADDED["plan"]
    assert _chars(prompts.reflect_messages(context, results)) <= WHOLE["reflect"]
    assert _chars(prompts.post_reflect_messages(context)) <= WHOLE["post_reflect"]


def test_a_long_output_is_cut_to_an_excerpt_that_says_so() -> None:
    output = "x" * 10_000
    context = TaskContext(input_text="count", actions_done=[ActionResult(step_index=0, tool="read", success=True,
                                                                         output=output)],
                          plan=Plan(goal="count", steps=[PlanStep(index=0, description="read", completed=True)]))
    shown = prompts.reflect_messages(context, context.actions_done)[1]["content"]
    assert "x" * prompts.EXCERPT_CHARS in shown and "x" * (prompts.EXCERPT_CHARS + 1) not in shown
    assert f"[cut: {prompts.EXCERPT_CHARS:,} of 10,000 characters shown]" in shown
    assert prompts.excerpt("short", 10) == "short" and prompts.excerpt({"a": 1}, 100) == {"a": 1}


def test_reflect_shows_the_plan_once() -> None:
    """Each step once, beside its result: the answer a respond step carries is not repeated, nor the
    plan's reasoning (before: the plan's steps, then every result again, 2,690 tokens at most)."""
    answer = "The sum of 12 and 30 is 42."
    steps = [PlanStep(index=0, description="add", action_params={"tool": "arithmetic",
                                                                 "args": {"expression": "12 + 30"}}, completed=True),
             PlanStep(index=1, description=f"respond: {answer}", action_type="respond",
                      action_params={"text": answer}, completed=True)]
    results = [ActionResult(step_index=0, tool="arithmetic", params={"expression": "12 + 30"}, success=True,
                            output=42),
               ActionResult(step_index=1, action_type="respond", success=True, output=answer)]
    context = TaskContext(input_text="what is 12 + 30?", actions_done=results,
                          plan=Plan(goal="add them", steps=steps, reasoning="a long justification " * 20))
    shown = prompts.reflect_messages(context, results)[1]["content"]
    assert shown.count(answer) == 1 and shown.count("12 + 30") == 2  # the request, and the step's arguments
    assert "justification" not in shown


def test_many_steps_show_the_first_and_the_last() -> None:
    results = [ActionResult(step_index=i, tool="echo", params={"text": f"s{i}"}, success=True, output=f"out{i}")
               for i in range(20)]
    shown = prompts.steps_view(results)
    assert len(shown) == prompts.STEPS_SHOWN + 1 and {"not shown": "12 steps"} in shown
    assert shown[0]["output"] == "out0" and shown[-1]["output"] == "out19"


# -- completion limits ------------------------------------------------------------------------------


def llm(**overrides: Any) -> Any:
    return Settings().with_overrides({"llm": {"provider": "openai", "model": "m", **overrides}}).llm


MESSAGES = [{"role": "user", "content": "hi"}]


def test_a_short_stage_asks_for_few_tokens_but_never_a_reasoning_model() -> None:
    short = OUTPUT_TOKENS["reflect"]
    assert cap.request(llm(), Shape(), MESSAGES, short=short)["max_tokens"] == short
    assert cap.request(llm(), Shape(), MESSAGES)["max_tokens"] == 1024  # a stage not named: the setting
    assert cap.request(llm(max_output_tokens=100), Shape(), MESSAGES, short=short)["max_tokens"] == 100
    assert "max_tokens" not in cap.request(llm(max_output_tokens=0), Shape(token_param=""), MESSAGES, short=short)
    # Hidden reasoning counts against the cap: the setting, whole.
    assert cap.request(llm(), Shape(token_param="max_completion_tokens"), MESSAGES,
                       short=short)["max_completion_tokens"] == 1024
    assert cap.request(llm(reasoning_effort="low"), Shape(reasoning_effort=True), MESSAGES,
                       short=short)["max_tokens"] == 1024


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_each_stage_sends_its_own_limit(server: FakeOpenAI) -> None:
    config = Settings().with_overrides({"llm": {"provider": "openai", "base_url": server.url, "model": "m",
                                                "api_key_env": "", "max_retries": 0, "timeout_s": 5.0}})
    processors = processors_for(config)
    server.script(completion({"summary": "adds"}), completion({"approach": "add"}),
                  completion({"verdict": "complete", "assessment": "done"}),
                  completion({"goal": "g", "steps": [{"action_type": "respond", "text": "42"}]}))
    context = TaskContext(input_text="what is 12 + 30?", plan=Plan(goal="g", steps=[]))
    for name in ("perceive", "think", "reflect", "plan"):
        run_stage(processors, name, context, machine="classic")
    sent = [body.get("max_tokens") for body in server.requests]
    assert sent == [OUTPUT_TOKENS["perceive"], OUTPUT_TOKENS["think"], OUTPUT_TOKENS["reflect"], 1024], sent


def test_a_short_field_is_bounded_in_the_grammar_only() -> None:
    """The grammar rung holds reflect's words short; the reply model (and the json_schema rung) does not."""
    from pegasus.cognitive.replies import ReflectReply

    schema = cap.reply_schema("ReflectReply", ReflectReply.model_json_schema())
    assert schema.grammar is not None
    grammar = schema.grammar["properties"]
    assert grammar["assessment"]["maxLength"] == 240 and grammar["lessons"]["maxItems"] == 3
    assert "maxLength" not in json.dumps(schema.schema) and cap.SHORT not in json.dumps(schema.schema)
    assert ReflectReply(verdict="complete", assessment="x" * 5000).assessment == "x" * 5000
