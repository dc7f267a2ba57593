"""Real cognition through the real actor system: llm workers talk to a local OpenAI-compatible
server (tests/support/fake_openai.py on 127.0.0.1), tool workers run what the model asked for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI, completion, http_error, tool_call
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
NO_REFLECTOR = {"reflector": False}  # these tests count and order the model's calls: no post-task reflection among them

LLM_STAGES = {"perceive", "think", "plan", "reflect", "reason"}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def llm(server: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "", **extra}


def _llm_stages(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in task["stages"] if s["stage"] in LLM_STAGES]


def test_both_machines_run_end_to_end_on_a_model_server(pegasus, server: FakeOpenAI) -> None:
    """classic: perceive/think/plan(tool call)/act/reflect; reason_act: tool call, then the answer
    written with the tool's result in view.  Usage is recorded for every llm stage."""
    client = pegasus(memory=NO_REFLECTOR, llm=llm(server, max_retries=0))

    server.script(
        completion({"task_type": "math", "intents": ["multiply"], "entities": {"numbers": [6, 7]}}),
        completion({"need_more_info": False, "approach": "use arithmetic"}),
        completion(tool_calls=[tool_call("arithmetic", {"expression": "6 * 7"})]),
        completion({"verdict": "complete", "assessment": "computed"}),
    )
    classic = client.wait(client.submit("what is six times seven?", machine="classic")["task_id"], timeout=60)
    assert (classic["lifecycle_state"], classic["state"]) == ("done", "completed"), classic.get("error")
    assert classic["result"] == "6 * 7 = 42"
    assert [s["stage"] for s in classic["stages"]] == ["perceive", "think", "plan", "act", "act", "reflect"]
    reflect_request = server.requests[3]
    assert '"output": 42' in reflect_request["messages"][-1]["content"]  # the tool result reached the model
    for stage in _llm_stages(classic):
        assert stage["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "calls": 1,
                                  "model": "test-model"}

    server.script(
        completion(tool_calls=[tool_call("echo", {"text": "pegasus"}, "call_abc")]),
        completion({"thought": "echoed", "answer": "The tool said: pegasus"}),
    )
    react = client.wait(client.submit("echo pegasus and tell me", machine="reason_act")["task_id"], timeout=60)
    assert (react["lifecycle_state"], react["result"]) == ("done", "The tool said: pegasus"), react.get("error")
    assert [s["stage"] for s in react["stages"]] == ["reason", "act", "reason", "act"]
    second = server.requests[5]["messages"]
    calls = [m for m in second if m["role"] == "assistant" and m.get("tool_calls")]
    assert json.loads(calls[0]["tool_calls"][0]["function"]["arguments"]) == {"text": "pegasus"}
    assert [m["content"] for m in second if m["role"] == "tool"] == ["pegasus"]
    assert all(stage["usage"]["calls"] == 1 for stage in _llm_stages(react))
    assert len(server.requests) == 6


def test_invalid_replies_rate_limits_and_timeouts_fail_cleanly(pegasus, server: FakeOpenAI) -> None:
    """Malformed then valid: done.  Malformed twice, a 429, a timeout: each task fails with a clear
    error (exit_reason 'exception', 'retry_exhausted', 'timeout'); the system keeps serving."""
    client = pegasus(memory=NO_REFLECTOR, llm=llm(server, max_retries=0, timeout_s=1.5))

    def run(text: str) -> dict[str, Any]:
        return client.wait(client.submit(text, machine="reason_act")["task_id"], timeout=60)

    server.script(completion('{"answer": "4'), completion({"answer": "42"}))  # JSON gone wrong: corrected
    fixed = run("what is the answer?")
    assert (fixed["lifecycle_state"], fixed["result"]) == ("done", "42")
    assert "could not be used" in server.requests[1]["messages"][-1]["content"]
    assert _llm_stages(fixed)[0]["usage"]["calls"] == 2

    server.script(completion('{"thought": "no'), completion('{"thought": "no answer"}'))  # prose would be an answer
    broken = run("what is the answer?")
    assert (broken["lifecycle_state"], broken["exit_reason"]) == ("failed", "exception")
    assert broken["error"].startswith("reason stage failed: the model's reply was invalid 2 times")
    assert broken["error"].count("reason") == 1, broken["error"]  # the stage is named once

    # Rate-limited past the pool's patience (max_retries: 0 here, so one request): the task fails as
    # RateLimited, exit_reason retry_exhausted (docs/llm.md), with the 429 named.
    server.script(http_error(429, "slow down", {"Retry-After": "0.2"}))
    limited = run("what is the answer?")
    assert (limited["lifecycle_state"], limited["exit_reason"]) == ("failed", "retry_exhausted")
    assert limited["error"].startswith("reason stage failed: RateLimited: ") and "429" in limited["error"]
    assert _llm_stages(limited)[-1]["retry_after_s"] == 0.2

    server.script(completion({"answer": "late"}, delay_s=4.0))
    slow = run("what is the answer?")
    assert slow["lifecycle_state"] == "failed" and "did not answer within 1.5s" in slow["error"]

    server.script(completion({"answer": "still here"}))
    assert run("are you there?")["result"] == "still here"


def test_a_429_pauses_the_llm_pool_for_retry_after_then_the_same_stage_runs(pegasus, server: FakeOpenAI) -> None:
    """The endpoint says 429 with Retry-After: 1.  The pool holds every llm call for that long,
    then runs the same stage again: the task completes, nothing failed."""
    client = pegasus(memory=NO_REFLECTOR, llm=llm(server, max_retries=1))  # the pool's one retry of a 429
    server.script(http_error(429, "slow down", {"Retry-After": "1"}), completion({"answer": "42"}))
    done = client.wait(client.submit("what is the answer?", machine="reason_act")["task_id"], timeout=60)
    assert (done["lifecycle_state"], done["result"]) == ("done", "42"), done.get("error")
    assert len(server.requests) == 2
    assert server.arrivals[1] - server.arrivals[0] >= 1.0  # not before Retry-After had passed
    assert [s["ok"] for s in _llm_stages(done)] == [True]  # the limited attempt never reached the task


def test_a_token_budget_spaces_the_calls(pegasus, server: FakeOpenAI) -> None:
    """tpm 3000: the first call is estimated (~1,950 tokens with a 1,500-token output cap) and
    reconciled with its reported usage (2,500): the second call must wait for the window."""
    client = pegasus(memory=NO_REFLECTOR, llm=llm(server, max_retries=0, tpm=3000, max_output_tokens=1500))
    server.script(completion({"answer": "one"}, prompt_tokens=2000, completion_tokens=500),
                  completion({"answer": "two"}))
    first = client.submit("first?", machine="reason_act")["task_id"]
    wait_for(lambda: server.requests, what="the first call")  # it holds the budget, not the second
    second = client.submit("second?", machine="reason_act")["task_id"]
    assert client.wait(first, timeout=60)["result"] == "one"
    # The second call waits in the pool's queue (the window's budget is spent): waited for, then checked unsent.
    llm_pool = wait_for(lambda: (pool := client.stats()["pools"]["llm"])["queued"] == 1 and pool,
                        what="the second call queued by the budget")
    assert len(server.requests) == 1  # the budget holds the second call back
    assert client.get(second)["lifecycle_state"] == "running"
    # What is left of the window's budget, for pegasus stats and the dashboard: 2,500 of 3,000 tokens used.
    assert llm_pool["budget"]["default"]["tpm"] == 3000 and llm_pool["budget"]["default"]["tokens_left"] == 500
    client.cancel(second)
