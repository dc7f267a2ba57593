"""Refusals read from what the body says, not from its status (issue 29): real servers' bodies in, the
parameter refused out; a refusal is stepped down at once, with no retry spent on it, and only what is
transient is sent again (the retries are Pegasus's, not the SDK's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pegasus.config import LLMSettings
from pegasus.llm import capabilities as cap
from pegasus.llm import ladder
from pegasus.llm.capabilities import Schema
from pegasus.llm.client import ChatClient, LLMError
from pegasus.llm.usage import metering
from tests.support.fake_openai import FakeOpenAI, completion

SCHEMA = Schema("Reply", {"type": "object", "properties": {"a": {"type": "string"}}}, strict=True)
MESSAGES = [{"role": "user", "content": "hi"}]
SENT = {"model", "messages", "temperature", "max_tokens", "tools", "tool_choice", "response_format"}

# llama-cpp-python 0.3.36: FastAPI's validation error, wrapped by its RouteErrorHandler as a 500.
LLAMA_CPP_PYTHON_500 = {"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
               "'ctx': {'expected': \"'text' or 'json_object'\"}}",
    "type": "internal_server_error", "param": None, "code": None}}
# OpenAI: the refused parameter in ``param``, its message naming only the value.
OPENAI_400_PARAM = {"error": {"message": "Invalid value: 'auto'. Supported values are: 'none'.",
                              "type": "invalid_request_error", "param": "tool_choice", "code": "invalid_value"}}
# vLLM (and LiteLLM's proxy before it): pydantic's extra_forbidden, the error list quoted inside the message.
VLLM_400_EXTRA = {"object": "error", "message": json.dumps([{
    "type": "extra_forbidden", "loc": ["body", "temperature"], "msg": "Extra inputs are not permitted",
    "input": 0.0}]), "type": "BadRequestError", "param": None, "code": 400}


@pytest.mark.parametrize(("body", "parameter"), [
    (LLAMA_CPP_PYTHON_500, "response_format"),
    (OPENAI_400_PARAM, "tools"),
    (VLLM_400_EXTRA, "temperature"),  # worked before issue 29 too: kept as a guard
])
def test_the_body_names_the_refused_parameter(body: dict[str, Any], parameter: str) -> None:
    assert cap.named(json.dumps(body), SENT) == parameter


def llm(url: str, **values: Any) -> LLMSettings:
    return LLMSettings(provider="openai", model="m", api_key_env="", base_url=url, **values)


def error(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "headers": {}, "body": body, "delay_s": 0.0}


def test_a_500_that_names_a_parameter_sent_is_a_refusal_stepped_down_at_once() -> None:
    """llama-cpp-python's 500 to json_schema: one request refused, none retried, then json_object with
    the schema (its grammar), taken; the step is in the stage's usage."""
    ladder.KNOWN.clear()
    with FakeOpenAI([error(500, LLAMA_CPP_PYTHON_500), completion('{"a": "b"}')]) as server:
        with metering() as meter:
            reply, shape = ladder.complete(ChatClient(llm(server.url, max_retries=2)), lambda s: MESSAGES,
                                           schema=SCHEMA)
        formats = [r["response_format"] for r in server.requests]
    assert reply.content == '{"a": "b"}' and shape.structured == "json_object_schema"
    assert formats == [{"type": "json_schema", "json_schema": {"name": "Reply", "schema": SCHEMA.schema,
                                                               "strict": True}},
                       {"type": "json_object", "schema": SCHEMA.schema}]
    assert meter.ladder == ["response_format json_schema refused: using json_object_schema"]


def test_openais_param_names_what_its_message_does_not() -> None:
    """The 400's message names only the value; its ``param`` names tool_choice: tools are prompted."""
    ladder.KNOWN.clear()
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]
    with FakeOpenAI([error(400, OPENAI_400_PARAM), completion("ok")]) as server:
        reply, shape = ladder.complete(ChatClient(llm(server.url, max_retries=0)), lambda s: MESSAGES,
                                       tools=tools, tool_choice="auto")
        assert reply.content == "ok" and shape.tools == "prompted" and "tools" not in server.requests[1]


def test_a_500_that_names_nothing_is_transient_and_retried_then_fails() -> None:
    """A guard (true before issue 29, when the SDK retried): the retries are now Pegasus's own."""
    ladder.KNOWN.clear()
    broken = error(500, {"error": {"message": "CUDA out of memory", "type": "internal_server_error"}})
    with FakeOpenAI([broken, completion("fine")]) as server:
        reply, _ = ladder.complete(ChatClient(llm(server.url, max_retries=1)), lambda s: MESSAGES)
        assert reply.content == "fine" and len(server.requests) == 2
    with FakeOpenAI([broken] * 3) as server:
        with pytest.raises(LLMError, match="answered 500: CUDA out of memory"):
            ladder.complete(ChatClient(llm(server.url, max_retries=1)), lambda s: MESSAGES)
        assert len(server.requests) == 2  # the first and one retry: never more than max_retries


def test_a_reply_without_usage_is_estimated_and_marked_so() -> None:
    ladder.KNOWN.clear()
    reply = completion("seventeen times twenty-three is 391")
    del reply["body"]["usage"]
    with FakeOpenAI([reply]) as server:
        got, _ = ladder.complete(ChatClient(llm(server.url, max_retries=0)), lambda s: MESSAGES)
    assert got.usage["estimated"] == 1 and got.usage["completion_tokens"] == 9 and got.usage["prompt_tokens"] > 0
    assert got.usage["total_tokens"] == got.usage["prompt_tokens"] + got.usage["completion_tokens"]
