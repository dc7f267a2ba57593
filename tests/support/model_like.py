"""A responder for tests/support/fake_openai.py that answers like a small model would: from what
the request shows (the stage in its system prompt, the tools offered natively or in the prompt,
the tool results in the conversation), so that both machines run to completion on a request of
the form "what is A op B?" (it calls the arithmetic tool, then answers with its result).

    with FakeOpenAI(responder=ModelLike(quirks), quirks=quirks) as server: ...

It honours ``Quirks.prose``: JSON that no response_format holds comes wrapped in a sentence and a
code fence, and reason_act's final answer is prose.  Every reply it gives is valid for its stage;
it never sends ``tool_calls`` when the request carried no ``tools``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pegasus.llm.prompts import TOOL_RESULT  # the prompted protocol's result message
from tests.support.fake_openai import Quirks, Reply, completion, http_error, tool_call

_EXPRESSION = re.compile(r"\d+(?:\.\d+)?\s*[-+*/]\s*\d+(?:\.\d+)?")
_STAGES = {"perception stage": "perceive", "thinking stage": "think", "planning stage": "plan",
           "reflection stage": "reflect", "agent that reasons and acts": "reason", "post-task reflector": "post_reflect"}


class ModelLike:
    def __init__(self, quirks: Quirks | None = None) -> None:
        self.quirks = quirks or Quirks()

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        stage = next((name for marker, name in _STAGES.items() if marker in system), None)
        if stage is None:
            return http_error(500, "model-like responder: no stage prompt in the request")
        request = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        found = _EXPRESSION.search(request)
        expression = found.group(0) if found else "1 + 1"
        return getattr(self, f"_{stage}")(body, messages, expression)

    # -- replies -----------------------------------------------------------------------------
    def _json(self, body: dict[str, Any], value: dict[str, Any]) -> Reply:
        if self.quirks.prose and not body.get("response_format"):
            return completion(f"Sure! Here it is:\n```json\n{json.dumps(value)}\n```")
        return completion(value)

    def _call(self, body: dict[str, Any], expression: str, **extra: Any) -> Reply:
        """The arithmetic call: native when tools were sent, else the prompted protocol's JSON steps."""
        if body.get("tools"):
            return completion(tool_calls=[tool_call("arithmetic", {"expression": expression})])
        step = {"action_type": "tool_call", "tool": "arithmetic", "args": {"expression": expression},
                "description": f"compute {expression}"}
        return self._json(body, {**extra, "steps": [step]})

    def _perceive(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        return self._json(body, {"task_type": "math", "intents": [f"compute {expression}"],
                                 "entities": {"expression": [expression]}, "summary": f"compute {expression}"})

    def _think(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        return self._json(body, {"need_more_info": False, "question": None,
                                 "approach": "compute it with the arithmetic tool"})

    def _plan(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        return self._call(body, expression, goal=f"compute {expression}", reasoning="arithmetic does it")

    def _reflect(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        return self._json(body, {"verdict": "complete", "assessment": "the tool computed it", "lessons": [],
                                 "next_focus": None})

    def _post_reflect(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        return self._json(body, {"facts": [{"path": "arithmetic/last", "content": f"{expression} was computed"}],
                                 "episode": {"title": f"compute {expression}", "summary": "the tool computed it",
                                             "details": "", "lesson": "arithmetic does it"},
                                 "assessment": "done in one tool call"})

    def _reason(self, body: dict[str, Any], messages: list[dict[str, Any]], expression: str) -> Reply:
        result = _tool_result(messages)
        if result is None:
            return self._call(body, expression, thought="I need the arithmetic tool")
        answer = f"{expression} = {result}"
        if self.quirks.prose:
            return completion(f"Sure! {answer}.")
        return self._json(body, {"thought": "the tool answered", "need_more_info": False, "question": None,
                                 "answer": answer, "steps": []})


def _tool_result(messages: list[dict[str, Any]]) -> Any:
    """The last tool result in the conversation: a ``tool`` message, or the prompted protocol's."""
    for message in reversed(messages):
        content = str(message.get("content") or "")
        if message.get("role") == "tool":
            return content
        if message.get("role") == "user" and content.startswith(TOOL_RESULT):
            return json.loads(content[len(TOOL_RESULT):]).get("output")
    return None
