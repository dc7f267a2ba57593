"""Both machines run to completion on endpoints that refuse what real servers refuse, through real
Pegasus systems (the fake server in the mode of each, answered by the model-like responder), and
with each recipe of docs/llm.md, parsed as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pegasus.config import parse, parse_toml
from tests.support.fake_openai import FakeOpenAI, Quirks, refusal
from tests.support.model_like import ModelLike

pytestmark = pytest.mark.integration
NO_REFLECTOR = {"reflector": False}  # these tests count and order the model's calls: no post-task reflection among them

DOCS = Path(__file__).resolve().parents[2] / "docs" / "llm.md"
QUESTION = "what is 17 * 23?"
ONE_WORKER = {"llm_workers": 1, "tool_workers": 1}  # one process learns: the refusals are countable


def recipes() -> dict[str, str]:
    """The TOML of each ``<!-- recipe: NAME -->`` block of docs/llm.md."""
    text = DOCS.read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- recipe: ([\w-]+) -->\s*```toml\n(.*?)```", text, re.S))


def run_both(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    classic = client.wait(client.submit(QUESTION, machine="classic")["task_id"], timeout=60)
    react = client.wait(client.submit(QUESTION, machine="reason_act")["task_id"], timeout=60)
    for task in (classic, react):
        assert (task["lifecycle_state"], task["state"]) == ("done", "completed"), task.get("error")
        assert "391" in str(task["result"]), task["result"]
    assert [s["stage"] for s in classic["stages"]] == ["perceive", "think", "plan", "act", "act", "reflect"]
    assert [s["stage"] for s in react["stages"]] == ["reason", "act", "reason", "act"]
    return classic, react


# (quirks, how many requests the one worker has refused before it knows the model, what the requests
# then carry[, settings]).  Each refused parameter costs one request, once per process.
MODES: dict[str, tuple[Any, ...]] = {
    "tools refused as vLLM words it": (Quirks(refuse_tools="vllm"), 1, {"tools": False}),
    "tools refused as Ollama words it": (Quirks(refuse_tools="ollama"), 1, {"tools": False}),
    "neither tools nor response_format (llama.cpp without --jinja, old server)":
        (Quirks(refuse_tools="llamacpp", refuse_response_format="all"), 4,  # json_schema, with a schema, json_object
         {"tools": False, "response_format": False}),
    "json_schema refused, json_object taken": (Quirks(refuse_response_format="json_schema"), 1,
                                               {"response_format": "json_object"}),
    "a reasoning model: no max_tokens, no temperature": (Quirks(reasoning=True), 2,
                                                          {"max_tokens": False, "temperature": False,
                                                           "max_completion_tokens": True}),
    # Prompted structured output: nothing holds the JSON, so the model wraps it in prose and a fence.
    "prose around JSON and a final answer in prose": (Quirks(prose=True), 0, {"response_format": False},
                                                      {"structured_output": "prompted"}),
    "tool calls with finish_reason stop": (Quirks(tool_calls_stop=True), 0, {"tools": True}),
}


@pytest.mark.parametrize("mode", MODES)
def test_both_machines_complete_on_an_endpoint_that_refuses(pegasus, mode: str) -> None:
    """The ladder learns from the first refusals and every later request fits the endpoint."""
    quirks, refusals, carried, *settings = MODES[mode]
    with FakeOpenAI(responder=ModelLike(quirks), quirks=quirks) as server:
        client = pegasus(memory=NO_REFLECTOR, llm={"provider": "openai", "base_url": server.url, "model": "small-model",
                              "api_key_env": "", "max_retries": 0, **(settings[0] if settings else {})},
                         pools=ONE_WORKER)
        classic, react = run_both(client)
        assert len(server.refused) == refusals, [r.keys() for r in server.refused]
        accepted = [r for r in server.requests if refusal(r, quirks) is None]
        last = server.requests[-1]  # reason_act's last call: tools were offered (natively or prompted)
        for key, expected in carried.items():
            if key == "response_format":
                formats = {(r.get("response_format") or {}).get("type") for r in accepted}
                assert formats == ({None} if expected is False else {expected, None}), formats
            elif key == "tools":
                assert any("tools" in r for r in accepted) is expected
            else:
                assert (key in last) is expected, sorted(last)
    steps = [change for task in (classic, react) for s in task["stages"] for change in (s.get("usage") or {}).get(
        "ladder", [])]
    assert len(steps) == refusals, steps  # each step is in the record of the stage that took it
    if quirks.refuse_tools:
        assert "tools refused: tool calls prompted as JSON" in steps
    if quirks.prose:
        assert react["result"] == "Sure! 17 * 23 = 391."
    if quirks.refuse_tools:  # prompted: the results came back as user messages, never as tool messages
        assert not any(m["role"] == "tool" for r in server.requests for m in r["messages"])
        assert any(m["content"].startswith("Tool result:") for m in last["messages"] if m["role"] == "user")


def test_a_fixed_rung_that_the_endpoint_refuses_fails_with_the_setting_named(pegasus) -> None:
    """tool_calls = "native" on a server that refuses tools: no step down; the plan stage fails once,
    its message names the stage once and says which setting holds the ladder."""
    quirks = Quirks(refuse_tools="llamacpp")
    with FakeOpenAI(responder=ModelLike(quirks), quirks=quirks) as server:
        client = pegasus(memory=NO_REFLECTOR, llm={"provider": "openai", "base_url": server.url, "model": "m", "api_key_env": "",
                              "max_retries": 0, "tool_calls": "native"}, pools=ONE_WORKER)
        task = client.wait(client.submit(QUESTION, machine="classic")["task_id"], timeout=60)
    assert (task["lifecycle_state"], task["exit_reason"]) == ("failed", "exception")
    assert task["error"].startswith("plan stage failed: ") and task["error"].count("plan") == 1, task["error"]
    assert "tools param requires --jinja flag" in task["error"] and 'llm.tool_calls = \'native\'' in task["error"]


RECIPE_MODES = {
    "ollama": Quirks(tool_calls_stop=True, prose=True),
    "vllm": Quirks(refuse_tools="vllm"),
    "llamacpp": Quirks(refuse_tools="llamacpp"),
    "llama-cpp-python": Quirks(refuse_response_format="llama-cpp-python"),
    "openai": Quirks(),
    "openai-reasoning": Quirks(reasoning=True),
}


def test_every_recipe_is_tested() -> None:
    assert sorted(recipes()) == sorted(RECIPE_MODES)


@pytest.mark.parametrize("name", RECIPE_MODES)
def test_each_recipe_runs_both_machines_against_its_server(pegasus, name: str, monkeypatch) -> None:
    """The recipe as written (only base_url pointed at the fake); a recipe that fixes a rung
    (vLLM's prompted tools, the reasoning model's max_completion_tokens and temperature 1) is
    never refused; auto learns from one refusal."""
    text = recipes()[name]
    parse(text, f"docs/llm.md recipe {name}")  # parses into Settings as written
    llm = parse_toml(text)["llm"]
    if llm.get("api_key_env"):
        monkeypatch.setenv(llm["api_key_env"], "sk-test-recipe")
    quirks = RECIPE_MODES[name]
    with FakeOpenAI(responder=ModelLike(quirks), quirks=quirks) as server:
        client = pegasus(memory=NO_REFLECTOR, llm={**llm, "base_url": server.url, "max_retries": 0}, pools=ONE_WORKER)
        classic, react = run_both(client)
        expected = 1 if name in ("llamacpp", "llama-cpp-python") else 0
        assert len(server.refused) == expected
        if llm.get("api_key_env"):
            assert server.headers[-1]["authorization"] == "Bearer sk-test-recipe"
        if name == "llama-cpp-python":  # its 500 to json_schema read as a refusal; its streams carry no usage
            assert {(r.get("response_format") or {}).get("type") for r in server.requests[1:]} <= {"json_object", None}
            used = [s["usage"] for task in (classic, react) for s in task["stages"] if s.get("usage")]
            assert used and all(u["estimated_calls"] == u["calls"] for u in used), used
        if name == "openai-reasoning":
            assert {r.get("reasoning_effort") for r in server.requests} == {"low"}
            assert all(r["max_completion_tokens"] == 4096 and r["temperature"] == 1.0 for r in server.requests)
