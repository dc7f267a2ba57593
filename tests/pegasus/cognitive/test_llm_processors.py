"""The LLM-backed processors against a local OpenAI-compatible server (no actor system).

Each test scripts the server's replies and asserts on the stage outcome and on
the request bodies the processors sent.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from pegasus.config import Settings
from pegasus.errors import ConfigError
from pegasus.cognitive.llm import LLMPerceiver, RateLimited, json_object
from pegasus.cognitive.offline import OfflinePerceiver
from pegasus.cognitive.stages import StageError, processors_for, run_stage
from pegasus.llm.prompts import api_name, tool_specs
from pegasus.task.events import EventType
from pegasus.task.models import ActionResult, Plan, PlanStep, TaskContext
from tests.support.fake_openai import FakeOpenAI, Quirks, completion, http_error, tool_call


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def settings(server: FakeOpenAI, **llm: Any) -> Settings:
    base = {"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "",
            "max_retries": 0, "timeout_s": 5.0}
    return Settings().with_overrides({"llm": {**base, **llm}})


def stage(server: FakeOpenAI, name: str, context: TaskContext, machine: str = "classic", **llm: Any):
    return run_stage(processors_for(settings(server, **llm)), name, context, machine=machine)


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")


# -- the classic stages ------------------------------------------------------------------------------


def test_perceive_validates_json_into_a_perception_dict(server: FakeOpenAI) -> None:
    server.script(completion({"task_type": "math", "intents": ["compute 6*7"], "entities": {"numbers": [6, 7]}}))
    outcome = stage(server, "perceive", TaskContext(input_text="what is 6*7?"))
    assert outcome.event_type == EventType.PERCEIVE_DONE
    assert outcome.payload["perception"]["intents"] == ["compute 6*7"]
    body = server.requests[0]
    assert body["model"] == "test-model" and body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "PerceptionReply"
    assert "what is 6*7?" in _user_text(body)


def test_think_can_ask_for_more_information(server: FakeOpenAI) -> None:
    server.script(completion({"need_more_info": True, "question": "Which file?"}))
    outcome = stage(server, "think", TaskContext(input_text="read it", perception={"intents": []}))
    assert outcome.event_type == EventType.NEED_MORE_INFO and outcome.payload["question"] == "Which file?"


def test_plan_maps_native_tool_calls_to_tool_call_steps(server: FakeOpenAI) -> None:
    server.script(completion(tool_calls=[tool_call("arithmetic", {"expression": "6*7"})]))
    outcome = stage(server, "plan", TaskContext(input_text="what is 6*7?", reasoning={"approach": "compute"}))
    steps = outcome.payload["plan"]["steps"]
    assert [s["action_type"] for s in steps] == ["tool_call", "respond"]
    assert steps[0]["action_params"] == {"tool": "arithmetic", "args": {"expression": "6*7"}}
    functions = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert functions["arithmetic"]["parameters"]["required"] == ["expression"]
    assert "response_format" not in server.requests[0]  # tools and JSON mode do not mix on every server


def test_plan_as_json_with_a_respond_text(server: FakeOpenAI) -> None:
    server.script(completion({"goal": "greet", "steps": [{"action_type": "respond", "text": "Hello!"}]}))
    outcome = stage(server, "plan", TaskContext(input_text="say hello"))
    assert outcome.payload["plan"]["steps"] == [
        {"index": 0, "description": "respond: Hello!", "action_type": "respond",
         "action_params": {"text": "Hello!"}, "completed": False}]


def test_reflect_gives_a_verdict(server: FakeOpenAI) -> None:
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="x", action_type="tool_call",
                                          action_params={"tool": "echo", "args": {"text": "hi"}}, completed=True)])
    done = [ActionResult(step_index=0, tool="echo", params={"text": "hi"}, success=True, output="hi")]
    server.script(completion({"verdict": "complete", "assessment": "echoed"}))
    outcome = stage(server, "reflect", TaskContext(input_text="echo hi", plan=plan, actions_done=done))
    assert outcome.payload["reflection"]["verdict"] == "complete"
    assert '"output": "hi"' in _user_text(server.requests[0])


# -- reason_act ----------------------------------------------------------------------------------------


def test_reason_tool_call_then_answer_with_the_result_in_view(server: FakeOpenAI) -> None:
    server.script(completion(tool_calls=[tool_call("arithmetic", {"expression": "6*7"})]),
                  completion({"thought": "done", "answer": "6 * 7 is 42"}))
    context = TaskContext(input_text="what is 6*7?")
    first = stage(server, "reason", context, machine="reason_act")
    assert first.event_type == EventType.REASON_DONE
    assert [s["action_type"] for s in first.payload["plan"]["steps"]] == ["tool_call"]
    context.plan = Plan.model_validate(first.payload["plan"])
    context.actions_done.append(ActionResult(step_index=0, tool="arithmetic", params={"expression": "6*7"},
                                             success=True, output=42))
    second = stage(server, "reason", context, machine="reason_act")
    steps = second.payload["plan"]["steps"]
    assert [s["action_type"] for s in steps] == ["respond"] and steps[0]["action_params"]["text"] == "6 * 7 is 42"
    tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages and tool_messages[0]["content"] == "42"
    context.plan = Plan.model_validate(second.payload["plan"])
    act = run_stage(processors_for(settings(server)), "act", context, machine="reason_act")
    assert act.event_type == EventType.STEP_COMPLETED and act.payload["final_result"] == "6 * 7 is 42"


def test_reason_over_the_tool_budget_must_answer(server: FakeOpenAI) -> None:
    done = [ActionResult(step_index=0, tool="echo", params={"text": "x"}, success=True, output="x")] * 2
    server.script(completion({"answer": "enough"}))
    outcome = stage(server, "reason", TaskContext(input_text="loop", actions_done=done), machine="reason_act",
                    max_tool_calls=2)
    assert outcome.payload["plan"]["steps"][0]["action_params"]["text"] == "enough"
    assert server.requests[0]["tool_choice"] == "none"


# -- invalid replies ---------------------------------------------------------------------------------------


def test_malformed_json_then_valid_json_succeeds_with_the_error_fed_back(server: FakeOpenAI) -> None:
    server.script(completion("this is not JSON"), completion({"task_type": "x", "intents": []}))
    outcome = stage(server, "perceive", TaskContext(input_text="hi"))
    assert outcome.payload["perception"]["task_type"] == "x"
    retry = server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "this is not JSON"}
    assert "not valid JSON" in retry[-1]["content"]
    assert outcome.usage == {"prompt_tokens": 22, "completion_tokens": 14, "total_tokens": 36, "calls": 2,
                             "model": "test-model"}


def test_malformed_twice_fails_the_stage_clearly(server: FakeOpenAI) -> None:
    server.script(completion("nope"), completion('{"verdict": "maybe"}'))
    with pytest.raises(StageError, match=r"invalid 2 times.*verdict") as caught:
        stage(server, "reflect", TaskContext(input_text="x"))
    assert caught.value.stage == "reflect" and caught.value.usage["calls"] == 2


def test_an_unknown_tool_or_bad_arguments_are_fed_back(server: FakeOpenAI) -> None:
    server.script(completion(tool_calls=[tool_call("rm_rf", {})]),
                  completion(tool_calls=[tool_call("arithmetic", {"expr": "1"})]),
                  completion(tool_calls=[tool_call("arithmetic", {"expression": "1+1"})]))
    with pytest.raises(StageError, match="bad argument"):
        stage(server, "reason", TaskContext(input_text="x"), machine="reason_act")
    assert "unknown tool 'rm_rf'; known tools: arithmetic" in server.requests[1]["messages"][-1]["content"]
    outcome = stage(server, "reason", TaskContext(input_text="x"), machine="reason_act")
    assert outcome.payload["plan"]["steps"][0]["action_params"]["args"] == {"expression": "1+1"}


def test_json_replies_in_a_code_fence_are_accepted() -> None:
    assert json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert json_object('Sure! {"a": 2} hope this helps') == {"a": 2}


# -- transport failures --------------------------------------------------------------------------------------


def test_429_beyond_the_retries_raises_rate_limited_with_retry_after(server: FakeOpenAI) -> None:
    server.script(http_error(429, "slow down", {"Retry-After": "7"}))
    with pytest.raises(RateLimited) as caught:
        stage(server, "perceive", TaskContext(input_text="hi"))
    assert caught.value.retry_after_s == 7.0 and caught.value.stage == "perceive"
    assert "429" in str(caught.value) and isinstance(caught.value, StageError)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), copy.retry_after_s, copy.stage) == (RateLimited, 7.0, "perceive")


def test_a_429_through_litellm_carries_its_providers_retry_after() -> None:
    """LiteLLM's proxy (1.108.7, measured) answers a provider's 429 with ``llm_provider-retry-after: 2``."""
    from pegasus.llm.client import retry_after_seconds  # noqa: PLC0415

    assert retry_after_seconds({"llm_provider-retry-after": "2"}) == 2.0
    assert retry_after_seconds({"Retry-After": "1", "llm_provider-retry-after": "2"}) == 1.0  # its own first
    assert retry_after_seconds({"x-litellm-timeout": "6000.0"}) is None


def test_a_429_is_not_retried_by_the_client_its_pool_schedules_it(server: FakeOpenAI) -> None:
    """One layer of retries for a 429: the llm pool's, which pauses every call to the model (issue 29:
    the client's retries inside the pool's made 12 requests of 3 x 4)."""
    server.script(http_error(429, "slow down", {"Retry-After": "0.2"}), completion({"intents": []}))
    with pytest.raises(RateLimited) as caught:
        stage(server, "perceive", TaskContext(input_text="hi"), max_retries=1)
    assert caught.value.retry_after_s == 0.2 and len(server.requests) == 1


def test_a_slow_server_is_a_clear_timeout(server: FakeOpenAI) -> None:
    server.script(completion({"intents": []}, delay_s=1.5))
    with pytest.raises(StageError, match=r"did not answer within 0.3s") as caught:
        stage(server, "perceive", TaskContext(input_text="hi"), timeout_s=0.3)
    assert not isinstance(caught.value, RateLimited)


def test_other_http_errors_name_the_status(server: FakeOpenAI) -> None:
    server.script(http_error(400, "model not found"))
    with pytest.raises(StageError, match="answered 400: model not found"):
        stage(server, "perceive", TaskContext(input_text="hi"))


# -- keys and selection --------------------------------------------------------------------------------------


def test_the_key_comes_from_the_named_variable_and_is_never_shown(server: FakeOpenAI,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEGASUS_TEST_KEY", "sk-secret-123")
    server.script(completion({"intents": []}))
    stage(server, "perceive", TaskContext(input_text="hi"), api_key_env="PEGASUS_TEST_KEY")
    assert server.headers[0]["authorization"] == "Bearer sk-secret-123"
    monkeypatch.delenv("PEGASUS_TEST_KEY")
    with pytest.raises(StageError, match="PEGASUS_TEST_KEY .* is not set") as caught:
        stage(server, "perceive", TaskContext(input_text="hi"), api_key_env="PEGASUS_TEST_KEY")
    assert "sk-secret" not in str(caught.value)


def test_a_local_server_needs_no_key_setting(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only provider, base_url and model set (issue 29): api_key_env left at OPENAI_API_KEY, unset, and the
    server on 127.0.0.1: the placeholder is sent.  Elsewhere the unset variable is still an error."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.script(completion({"intents": []}))
    stage(server, "perceive", TaskContext(input_text="hi"), api_key_env="OPENAI_API_KEY")
    assert server.headers[0]["authorization"] == "Bearer not-needed"
    with pytest.raises(StageError, match="OPENAI_API_KEY .* is not set"):
        stage(server, "perceive", TaskContext(input_text="hi"), api_key_env="OPENAI_API_KEY",
              base_url="https://api.example.com/v1")


def test_no_key_needed_sends_a_placeholder(server: FakeOpenAI) -> None:
    server.script(completion({"intents": []}))
    stage(server, "perceive", TaskContext(input_text="hi"))
    assert server.headers[0]["authorization"] == "Bearer not-needed"


def test_processors_for_selects_by_provider(server: FakeOpenAI) -> None:
    assert isinstance(processors_for(Settings()).perceiver, OfflinePerceiver)
    assert isinstance(processors_for(settings(server)).perceiver, LLMPerceiver)
    with pytest.raises(ConfigError, match="llm.provider"):  # an unknown provider never gets this far
        Settings().with_overrides({"llm": {"provider": "telepathy"}})


def test_offline_outcomes_carry_no_usage() -> None:
    outcome = run_stage(processors_for(Settings()), "perceive", TaskContext(input_text="echo hi"), machine="classic")
    assert outcome.usage is None


def test_tool_names_become_valid_function_names() -> None:
    specs = tool_specs([{"name": "demo.reverse", "description": "d", "schema": {"type": "object"},
                         "effect": "effectful"}])
    assert api_name("demo.reverse") == "demo__reverse" == specs.specs[0]["function"]["name"]
    assert specs.tool_name("demo__reverse") == "demo.reverse"
    assert json.dumps(specs.specs)  # plain JSON


# -- issue 17: what small and reasoning models do ---------------------------------------------------------

SEEN = [ActionResult(step_index=0, tool="arithmetic", params={"expression": "17*23"}, success=True, output=391)]


def test_a_final_answer_in_prose_after_tool_results_is_the_answer(server: FakeOpenAI) -> None:
    server.script(completion("Sure! 17 * 23 = 391."))
    outcome = stage(server, "reason", TaskContext(input_text="17*23?", actions_done=list(SEEN)), machine="reason_act")
    assert outcome.event_type == EventType.REASON_DONE and len(server.requests) == 1
    steps = outcome.payload["plan"]["steps"]
    assert [s["action_type"] for s in steps] == ["respond"]
    assert steps[0]["action_params"]["text"] == "Sure! 17 * 23 = 391."




def test_tool_calls_with_finish_reason_stop_are_tool_calls() -> None:
    with FakeOpenAI(quirks=Quirks(tool_calls_stop=True)) as fake:
        fake.script(completion(tool_calls=[tool_call("arithmetic", {"expression": "6*7"})]))
        outcome = stage(fake, "reason", TaskContext(input_text="6*7?"), machine="reason_act")
    assert outcome.payload["plan"]["steps"][0]["action_params"]["tool"] == "arithmetic"


def test_prompted_tools_list_the_tools_and_map_json_steps_like_native_calls() -> None:
    """tools refused: the plan prompt lists each tool with its argument schema; the JSON step is
    validated against the registry as a native call is (a bad argument is fed back)."""
    with FakeOpenAI(quirks=Quirks(refuse_tools="llamacpp")) as fake:
        bad = {"steps": [{"action_type": "tool_call", "tool": "arithmetic", "args": {"expr": "1"}}]}
        good = {"goal": "g",
                "steps": [{"action_type": "tool_call", "tool": "arithmetic", "args": {"expression": "6*7"}}]}
        fake.script(completion(bad), completion(good))
        outcome = stage(fake, "plan", TaskContext(input_text="6*7?"))
    assert [s["action_type"] for s in outcome.payload["plan"]["steps"]] == ["tool_call", "respond"]
    refused, first, second = fake.requests
    assert "tools" in refused and "tools" not in first and first["response_format"]["type"] == "json_schema"
    system = first["messages"][0]["content"]
    assert "Function calls are not available" in system and '"expression"' in system
    assert "bad argument" in second["messages"][-1]["content"]


def test_prompted_tool_results_come_back_as_user_messages() -> None:
    with FakeOpenAI() as fake:
        fake.script(completion({"answer": "391"}))
        stage(fake, "reason", TaskContext(input_text="17*23?", actions_done=list(SEEN)), machine="reason_act",
              tool_calls="prompted")
    messages = fake.requests[0]["messages"]
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    assert json.loads(messages[-2]["content"])["steps"][0]["tool"] == "arithmetic"
    assert messages[-1]["content"].startswith("Tool result:") and '"output": 391' in messages[-1]["content"]
