"""A reply in prose is an answer, not an error (issue 29): reason_act takes it at once as the final
answer (ReAct's convention), so does a plan that was offered tools as functions and called none; every
other stage reads it after its one corrective retry, and the
stage's usage says it degraded.  JSON gone wrong is still corrected, and fails after two replies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pegasus.cognitive.stages import StageError, processors_for, run_stage
from pegasus.config import Settings
from pegasus.task.models import ActionResult, Plan, PlanStep, TaskContext
from tests.support.fake_openai import FakeOpenAI, completion

PROSE = "17 * 23 = 391."


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def stage(server: FakeOpenAI, name: str, context: TaskContext, machine: str = "classic") -> Any:
    settings = Settings().with_overrides({"llm": {"provider": "openai", "base_url": server.url, "model": "m",
                                                  "api_key_env": "", "max_retries": 0, "timeout_s": 5.0}})
    return run_stage(processors_for(settings), name, context, machine=machine)


def test_on_reason_act_a_reply_without_a_tool_call_is_the_final_answer(server: FakeOpenAI) -> None:
    server.script(completion(PROSE))
    outcome = stage(server, "reason", TaskContext(input_text="what is 17 * 23?"), machine="reason_act")
    steps = outcome.payload["plan"]["steps"]
    assert [s["action_type"] for s in steps] == ["respond"] and steps[0]["action_params"]["text"] == PROSE
    assert len(server.requests) == 1  # no corrective retry
    assert outcome.usage["degraded"] == ["reason: the reply was prose, not JSON; read as the answer"]


DONE = Plan(goal="g", steps=[PlanStep(index=0, description="x", action_type="tool_call",
                                      action_params={"tool": "echo", "args": {"text": "hi"}}, completed=True)])


@pytest.mark.parametrize(("name", "read"), [
    ("perceive", lambda p: p["perception"]["summary"] == PROSE),
    ("think", lambda p: p["reasoning"]["approach"] == PROSE and not p["reasoning"]["need_more_info"]),
    ("reflect", lambda p: p["reflection"]["verdict"] == "complete" and p["reflection"]["assessment"] == PROSE),
])
def test_other_stages_read_prose_after_their_one_corrective_retry(server: FakeOpenAI, name: str, read: Any) -> None:
    server.script(completion("Let me think."), completion(PROSE))
    context = TaskContext(input_text="what is 17 * 23?", perception={"intents": []}, reasoning={"approach": "x"},
                          plan=DONE, actions_done=[ActionResult(step_index=0, tool="echo", params={"text": "hi"},
                                                                success=True, output="hi")])
    outcome = stage(server, name, context)
    assert read(outcome.payload), outcome.payload
    assert len(server.requests) == 2 and "not valid JSON" in server.requests[1]["messages"][-1]["content"]
    assert outcome.usage["degraded"] == [f"{name}: the reply was prose, not JSON; read as its text after 2 replies"]


def test_a_plan_in_prose_that_called_none_of_the_tools_offered_is_the_answer_at_once(server: FakeOpenAI) -> None:
    """Measured on SmolLM2-135M (llama-cpp-python takes ``tools`` and never calls one): all 6 classic plans
    were prose, and prose again when asked once more.  Offered functions and calling none, the model answered."""
    server.script(completion(PROSE))
    outcome = stage(server, "plan", TaskContext(input_text="what is 17 * 23?", perception={"intents": []}))
    assert [(s["action_type"], s["action_params"]) for s in outcome.payload["plan"]["steps"]] \
        == [("respond", {"text": PROSE})]
    assert len(server.requests) == 1 and server.requests[0]["tools"]
    assert outcome.usage["degraded"] == ["plan: the reply was prose, not JSON; read as the answer"]


def test_a_plan_in_prose_with_prompted_tools_is_corrected_once(server: FakeOpenAI) -> None:
    """Where tools are prompted, a call is JSON: prose may be a plan not written as asked, so it is fed back."""
    server.script(completion("Let me think."), completion(PROSE))
    settings = Settings().with_overrides({"llm": {"provider": "openai", "base_url": server.url, "model": "m",
                                                  "api_key_env": "", "max_retries": 0, "timeout_s": 5.0,
                                                  "tool_calls": "prompted"}})
    outcome = run_stage(processors_for(settings), "plan",
                        TaskContext(input_text="what is 17 * 23?", perception={"intents": []}), machine="classic")
    assert [(s["action_type"], s["action_params"]) for s in outcome.payload["plan"]["steps"]] \
        == [("respond", {"text": PROSE})]
    assert len(server.requests) == 2 and "tools" not in server.requests[0]
    assert outcome.usage["degraded"] == ["plan: the reply was prose, not JSON; read as its text after 2 replies"]


def test_json_gone_wrong_is_not_prose_and_still_fails(server: FakeOpenAI) -> None:
    server.script(completion('{"verdict": "compl'), completion('{"verdict": "maybe"}'))
    with pytest.raises(StageError, match="invalid 2 times"):
        stage(server, "reflect", TaskContext(input_text="x"))


def test_a_raw_newline_inside_a_json_string_is_read() -> None:
    """Measured: SmolLM2-135M wrote a newline inside a string ("Invalid control character"), twice."""
    from pegasus.cognitive.llm import json_object

    assert json_object('{"summary": "two\nlines"}') == {"summary": "two\nlines"}


# SmolLM2-135M's real plan replies (llama-cpp-python, plan on the tools rung: no grammar holds them), twice each.
QUOTED = ("A step may instead start a sub-task, a task of its own that another agent runs and whose answer comes back "
          "as the\nstep's result: {\"action_type\": \"sub_task\", \"text\": \"<the response to this action is returned\"}")
SORRY = ("I'm sorry for any confusion.\n\nA step may instead start a sub-task, a task of its own that another agent "
         "runs and whose answer comes back as the step's result: {\"action_type\": \"sub_task\", \"text\": \"<the "
         "action type is returned to the user\"}")


@pytest.mark.parametrize(("reply", "text"), [
    (QUOTED, QUOTED), (SORRY, SORRY),
    ('{"goal": "greet the user", "reasoning": "Hello! How can I help?"}', "Hello! How can I help?"),
])
def test_a_plan_whose_json_has_no_steps_is_read_as_one_respond_step(server: FakeOpenAI, reply: str, text: str) -> None:
    """Measured on SmolLM2-135M: 2 of 6 simple tasks' plans were refused twice as "steps: Field required"."""
    server.script(completion(reply), completion(reply))
    outcome = stage(server, "plan", TaskContext(input_text="echo pegasus", perception={"intents": []}))
    assert [(s["action_type"], s["action_params"]) for s in outcome.payload["plan"]["steps"]] \
        == [("respond", {"text": text})]
    assert len(server.requests) == 2 and "steps: Field required" in server.requests[1]["messages"][-1]["content"]
    assert outcome.usage["degraded"] == ["plan: the reply's JSON did not fit (the JSON does not fit the expected "
                                         "shape: steps: Field required); read as its text after 2 replies"]


@pytest.mark.parametrize("reply", ['{"steps": []}', '{"goal": "g", "steps": [{"action_type": "tool_call"}]}'])
def test_a_plan_with_no_words_or_with_wrong_steps_still_fails(server: FakeOpenAI, reply: str) -> None:
    server.script(completion(reply), completion(reply))
    with pytest.raises(StageError, match="invalid 2 times"):
        stage(server, "plan", TaskContext(input_text="echo pegasus", perception={"intents": []}))


def test_prose_that_ran_to_the_token_limit_is_read_at_once(server: FakeOpenAI) -> None:
    """Measured on SmolLM2-135M: a plan reply looping ("I'm here to help with any tasks...") to the 1024-token
    cap, then asked again and looping again: the plan overran its deadline behind the server's queue."""
    looped = completion("I'm here to help with any tasks or projects you have. " * 20)
    looped["body"]["choices"][0]["finish_reason"] = "length"
    server.script(looped)
    outcome = stage(server, "plan", TaskContext(input_text="good morning, how are you?", perception={"intents": []}))
    assert [s["action_type"] for s in outcome.payload["plan"]["steps"]] == ["respond"] and len(server.requests) == 1
    assert outcome.usage["degraded"] == ["plan: the reply was prose, not JSON; read as its text at once "
                                         "(it ran to the token limit)"]
