"""The capability ladder's decisions (pure: settings, shape and a 400's text in, the next shape out),
and the ladder's loop and memory against the local fake server (no actor system)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pegasus.cognitive.llm import PlanReply, ReasonReply, ThinkReply
from pegasus.config import LLMSettings, Settings
from pegasus.errors import ConfigError
from pegasus.llm import capabilities as cap
from pegasus.llm import ladder
from pegasus.llm.capabilities import Schema, Shape
from pegasus.llm.client import ChatClient, LLMBadRequest
from pegasus.llm.usage import metering
from tests.support.fake_openai import FakeOpenAI, Quirks, completion, http_error

SCHEMA = Schema("Reply", {"type": "object"}, strict=False)
TOOLS = [{"type": "function", "function": {"name": "echo", "description": "", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "user", "content": "hi"}]


def llm(**values: Any) -> LLMSettings:
    return LLMSettings(provider="openai", model="m", api_key_env="", max_retries=0, **values)


def test_auto_starts_at_the_top_and_a_fixed_setting_is_its_rung() -> None:
    assert cap.initial(llm()) == Shape("json_schema", "native", "max_tokens", True, False)
    fixed = cap.initial(llm(structured_output="prompted", tool_calls="prompted",
                            token_limit_param="max_completion_tokens", reasoning_effort="low"))
    assert fixed == Shape("prompted", "prompted", "max_completion_tokens", True, True)
    assert cap.initial(llm(max_output_tokens=0)).token_param == ""  # no cap: no parameter at all


def test_the_request_carries_what_its_shape_says() -> None:
    settings = llm(temperature=0.2, max_output_tokens=99, reasoning_effort="high")
    top = cap.initial(settings)
    body = cap.request(settings, top, MESSAGES, schema=SCHEMA)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "Reply",
                                       "schema": {"type": "object"}, "strict": False}}
    assert (body["temperature"], body["max_tokens"], body["reasoning_effort"]) == (0.2, 99, "high")
    # Native tools: no response format (some servers suppress function calls under one).
    assert "response_format" not in cap.request(settings, top, MESSAGES, tools=TOOLS, schema=SCHEMA)
    prompted = Shape("json_object", "prompted", "max_completion_tokens", False, False)
    body = cap.request(settings, prompted, MESSAGES, tools=TOOLS, tool_choice="none", schema=SCHEMA)
    assert "tools" not in body and "tool_choice" not in body and "temperature" not in body
    assert body["response_format"] == {"type": "json_object"} and body["max_completion_tokens"] == 99
    assert "response_format" not in cap.request(settings, Shape(structured="prompted"), MESSAGES, schema=SCHEMA)


SENT = {"model", "messages", "temperature", "max_tokens", "tools", "response_format", "reasoning_effort"}


@pytest.mark.parametrize(("text", "parameter"), [
    ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
     "instead.", "max_tokens"),
    ("Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is "
     "supported.", "temperature"),
    ("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
     "response_format"),
    ('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', "tools"),
    ("tools param requires --jinja flag", "tools"),
    ("registry.ollama.ai/library/gemma:2b does not support tools", "tools"),
    ("Unrecognized request argument supplied: reasoning_effort", "reasoning_effort"),
    ("litellm.UnsupportedParamsError: openai does not support parameters: ['tools'], for model=m. To drop "
     "these, set `litellm.drop_params=True`", "tools"),
    ("Invalid schema for response_format 'ThinkReply': In context=(), 'additionalProperties' is required to be "
     "supplied and to be false.", "response_format"),
    ('{"detail": [{"type": "extra_forbidden", "loc": ["body", "reasoning_effort"], "msg": "Extra inputs are not '
     'permitted"}]}', "reasoning_effort"),
    # Named but not refused: the request's fault, no step.
    ("'max_tokens' or 'max_completion_tokens' is too large: 9000. This model's maximum context length is 4096",
     None),
    ("This model's maximum context length is 8192 tokens.", None),
    ("messages: field required", None),
])
def test_which_parameter_a_400_refuses(text: str, parameter: str | None) -> None:
    assert cap.named(text, SENT) == parameter


def test_only_a_parameter_the_request_carried_is_blamed() -> None:
    assert cap.named("tools param requires --jinja flag", {"model", "messages"}) is None


def test_each_ladder_steps_down_to_its_foot() -> None:
    settings, shape = llm(), cap.initial(llm())
    rf = "Invalid parameter: 'response_format' of type 'x' is not supported with this model."
    steps = []
    for _ in range(4):
        step = cap.step_down(settings, shape, SENT, rf)
        if step is None:
            break
        shape = step.shape
        steps.append(shape.structured)
    assert steps == ["json_object_schema", "json_object", "prompted"]
    token = "Unsupported parameter: 'max_tokens' is not supported with this model."
    step = cap.step_down(settings, cap.initial(settings), SENT, token)
    assert step is not None and step.shape.token_param == "max_completion_tokens"
    again = cap.step_down(settings, step.shape, SENT | {"max_completion_tokens"},
                          "Unsupported parameter: 'max_completion_tokens'")
    assert again is not None and again.shape.token_param == ""
    tools = cap.step_down(settings, cap.initial(settings), SENT, "tools param requires --jinja flag")
    assert tools is not None and tools.shape.tools == "prompted" and "prompted" in tools.change
    assert cap.step_down(settings, tools.shape, SENT, "tools param requires --jinja flag") is None
    warm = cap.step_down(settings, cap.initial(settings), SENT, "Unsupported value: 'temperature' does not support 0.0")
    assert warm is not None and not warm.shape.temperature


def test_a_fixed_setting_never_steps() -> None:
    settings = llm(structured_output="json_schema", tool_calls="native", token_limit_param="max_tokens")
    shape = cap.initial(settings)
    for text in ("Invalid parameter: 'response_format' of type 'json_schema' is not supported",
                 "tools param requires --jinja flag", "Unsupported parameter: 'max_tokens' is not supported"):
        assert cap.step_down(settings, shape, SENT, text) is None


def test_reply_schemas_are_strict_where_they_can_be() -> None:
    think = cap.reply_schema("ThinkReply", ThinkReply.model_json_schema())
    assert think.strict and think.schema["additionalProperties"] is False
    assert sorted(think.schema["required"]) == sorted(think.schema["properties"])
    assert "default" not in str(think.schema)
    # A tool's arguments are a free-form object: not strict-able, sent as pydantic wrote it (less
    # Pegasus's own WHEN_MEANT marks).
    for model in (PlanReply, ReasonReply):
        loose = cap.reply_schema(model.__name__, model.model_json_schema())
        assert not loose.strict and loose.schema == json.loads(json.dumps(model.model_json_schema()).replace(
            ', "x-written-when-meant": true', ""))
    named = cap.reply_schema("Doc", {"type": "object", "title": "Doc", "properties": {
        "title": {"type": "string", "title": "Title", "default": ""}}})
    assert named.schema == {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"],
                            "additionalProperties": False}


# -- the loop and its memory -------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(quirks=Quirks(reasoning=True, refuse_tools="ollama")) as fake:
        yield fake


def test_a_refusal_steps_down_at_once_and_the_model_is_remembered(server: FakeOpenAI) -> None:
    client = ChatClient(llm(base_url=server.url))
    server.script(completion("one"), completion("two"))
    with metering() as meter:
        reply, shape = ladder.complete(client, lambda shape: MESSAGES, tools=TOOLS, schema=SCHEMA)
    assert meter.ladder == ["tools refused: tool calls prompted as JSON",
                            "max_tokens refused: sending max_completion_tokens", "temperature refused: leaving it out"]
    assert reply.content == "one" and len(server.requests) == 4  # max_tokens, temperature, tools refused
    assert shape == Shape("json_schema", "prompted", "max_completion_tokens", False, False)
    assert server.requests[-1]["response_format"]["type"] == "json_schema"  # tools prompted: JSON held again
    reply, _ = ladder.complete(ChatClient(llm(base_url=server.url)), lambda shape: MESSAGES, tools=TOOLS)
    assert reply.content == "two" and len(server.requests) == 5  # another client, same model: known


def test_a_400_that_refuses_nothing_fails_as_it_is(server: FakeOpenAI) -> None:
    server.quirks = Quirks()
    server.script(http_error(400, "'max_tokens' or 'max_completion_tokens' is too large: 1024."))
    with pytest.raises(LLMBadRequest, match="too large") as raised:
        ladder.complete(ChatClient(llm(base_url=server.url)), lambda shape: MESSAGES)
    assert len(server.requests) == 1 and raised.value.status == 400


def test_json_mode_is_refused_naming_its_replacement() -> None:
    with pytest.raises(ConfigError, match='json_mode was replaced by structured_output.*"prompted"'):
        Settings().with_overrides({"llm": {"json_mode": False}})
    with pytest.raises(ConfigError, match="llm.tool_calls"):
        Settings().with_overrides({"llm": {"tool_calls": "sometimes"}})


def test_the_grammar_rung_sends_a_closed_bounded_schema() -> None:
    """json_object with a schema (llama-cpp-python's grammar): every object closed, free-form values
    scalars and lists bounded, so a small model cannot write invented nested fields until max_tokens."""
    from pegasus.cognitive.llm import PerceptionReply

    schema = cap.reply_schema("PerceptionReply", PerceptionReply.model_json_schema())
    body = cap.request(llm(), Shape(structured="json_object_schema"), MESSAGES, schema=schema)
    grammar = body["response_format"]["schema"]
    assert body["response_format"]["type"] == "json_object" and grammar["additionalProperties"] is False
    assert grammar["properties"]["entities"]["additionalProperties"] == cap._scalar(80)  # kept short (SHORT)
    assert grammar["properties"]["intents"] == {"type": "array", "items": cap._scalar(120), "maxItems": 3}


def test_every_string_of_the_grammar_has_an_end() -> None:
    """Held inside a string by a grammar, SmolLM2-135M wrote on to max_tokens (1,023 tokens, 54-74 s at a load
    of 15): think and plan overran their deadline.  In the grammar every string is bounded; the strict
    json_schema rung is left as the model's schema."""
    from pegasus.cognitive.llm import PlanReply, ThinkReply

    def strings(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, list):
            return [s for item in node for s in strings(item)]
        if not isinstance(node, dict):
            return []
        own = [node] if node.get("type") == "string" and "enum" not in node else []
        return own + [s for value in node.values() for s in strings(value)]

    for model in (ThinkReply, PlanReply):
        schema = cap.reply_schema(model.__name__, model.model_json_schema())
        found = strings(schema.grammar)
        assert found and all(0 < s["maxLength"] <= cap.MAX_CHARS for s in found), model.__name__
    assert not any("maxLength" in s for s in strings(cap.reply_schema("T", ThinkReply.model_json_schema()).schema))
