"""The context budget (pegasus.llm.context): a prompt over the window is cut and summarised, pure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pegasus.config import LLMSettings
from pegasus.llm.context import (
    KEEP_CHARS,
    SUMMARY_PREFIX,
    cut,
    fit,
    fit_call,
    noting,
    prompt_limit,
    request_tokens,
)


def conversation(results: list[str]) -> list[dict[str, Any]]:
    """A reason_act prompt: system, request, then one tool round per result."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."},
                                      {"role": "user", "content": "count the words of each file"}]
    for n, result in enumerate(results):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{n}.txt"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": result})
    return messages


def test_a_prompt_within_the_window_is_left_alone() -> None:
    messages = conversation(["short"])
    fitted = fit(messages, 10_000)
    assert fitted.note is None and fitted.messages == messages


def test_older_tool_results_are_cut_first_oldest_first_the_newest_kept_whole() -> None:
    big = ["a" * 4000, "b" * 4000, "c" * 4000]
    messages = conversation(big)
    limit = request_tokens(messages) - 700  # less than cutting one result saves (~850 tokens)
    fitted = fit(messages, limit)
    tools = [m["content"] for m in fitted.messages if m["role"] == "tool"]
    assert len(tools[0]) < KEEP_CHARS + 100 and "characters cut to fit the context window" in tools[0]
    assert tools[1] == big[1] and tools[2] == big[2]  # enough after the oldest: the rest untouched
    assert fitted.note is not None and fitted.note["truncated_results"] == 1
    assert "summarised_messages" not in fitted.note
    assert fitted.note["fitted_tokens"] <= limit < fitted.note["estimated_tokens"]


def test_past_truncation_the_earlier_rounds_are_summarised_by_the_model() -> None:
    messages = conversation(["x" * 3000 for _ in range(6)])
    asked: list[list[dict[str, Any]]] = []

    def summarise(prompt: list[dict[str, Any]]) -> str:
        asked.append(prompt)
        return "f0..f4 had 3000 x each"

    limit = 1200  # far under six results even once cut
    fitted = fit(messages, limit, summarise=summarise)
    assert fitted.note is not None
    assert (fitted.note["summary_by"], fitted.note["summary"]) == ("model", "f0..f4 had 3000 x each")
    assert fitted.note["summarised_messages"] == 10  # five rounds of (call, result)
    roles = [m["role"] for m in fitted.messages]
    assert roles == ["system", "user", "user", "assistant", "tool"]  # the newest round stays, after the summary
    assert fitted.messages[2]["content"] == SUMMARY_PREFIX + "f0..f4 had 3000 x each"
    assert fitted.messages[4]["content"] == "x" * 3000 or fitted.note.get("cut_messages")
    assert request_tokens(fitted.messages) <= limit
    assert "read_file" in asked[0][1]["content"]  # the model saw what it summarises


def test_a_failed_summary_call_falls_back_to_a_mechanical_one() -> None:
    messages = conversation([f"result {n}: " + "y" * 3000 for n in range(5)])

    def summarise(prompt: list[dict[str, Any]]) -> str:
        raise RuntimeError("the endpoint answered 500")

    fitted = fit(messages, 1500, summarise=summarise)
    assert fitted.note is not None and fitted.note["summary_by"] == "mechanical"
    assert "500" in fitted.note["summary_error"]
    summary = fitted.messages[2]["content"]
    assert summary.startswith(SUMMARY_PREFIX) and "called read_file" in summary and "result 0" in summary
    assert request_tokens(fitted.messages) <= 1500


def test_a_huge_request_alone_is_cut_to_fit() -> None:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q" * 40_000}]
    fitted = fit(messages, 2000)
    assert fitted.note is not None and fitted.note["cut_messages"] >= 1
    assert request_tokens(fitted.messages) <= 2000 and fitted.messages[0] == messages[0]


def test_cut_keeps_head_and_tail() -> None:
    text = "HEAD" + "m" * 1000 + "TAIL"
    short = cut(text, 300)
    assert short.startswith("HEAD") and short.endswith("TAIL") and len(short) < 400
    assert cut("small", 300) == "small"


@pytest.mark.parametrize("window,output,limit", [(0, 1024, 0), (8000, 1000, 7000), (1000, 1024, 500)])
def test_the_prompt_limit_leaves_room_for_the_output(window: int, output: int, limit: int) -> None:
    assert prompt_limit(LLMSettings(context_window=window, max_output_tokens=output)) == limit


def test_fit_call_notes_what_it_did_for_the_stage() -> None:
    config = LLMSettings(context_window=2000, max_output_tokens=200)
    messages = conversation(["z" * 5000, "z" * 5000])
    with noting() as notes:
        fitted = fit_call(config, "reason", messages, (), None)
        untouched = fit_call(config, "reason", messages[:2], (), None)
    assert untouched == messages[:2]
    assert len(notes) == 1 and notes[0]["stage"] == "reason" and notes[0]["window"] == 2000
    assert request_tokens(fitted) <= 1800
    assert fit_call(LLMSettings(), "reason", messages, (), None) is messages  # no window: no limit
