"""The post-task reflector (seed 001's PostTaskReflector): after a task is done, what to keep.

It reads the finished task's context and returns a ``PostTaskReflection`` (facts to write, the
episode, an assessment); it never changes the task: the supervisor runs it after ``done`` at the
llm pool's lowest priority and writes its result.  ``OfflinePostReflector`` is deterministic; the
model-backed one is ``pegasus.cognitive.llm``'s.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pegasus.cognitive.remember import episode_title, remembered
from pegasus.task.models import Episode, Fact, PostTaskReflection, TaskContext

SUMMARY_CHARS = 200
DETAILS_CHARS = 4000


class PostReflector(Protocol):
    def run(self, context: TaskContext) -> PostTaskReflection:
        """What a finished task leaves in memory."""


def result_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, default=str, sort_keys=True)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


class OfflinePostReflector:
    """An episode from the input and the result; the facts the request asked to remember."""

    def run(self, context: TaskContext) -> PostTaskReflection:
        texts = [context.input_text] + [str(m.get("content") or "") for m in context.messages
                                        if m.get("role", "user") == "user"]
        facts: dict[str, Fact] = {}
        for text in texts:
            for fact in remembered(text):
                facts[fact.path] = fact  # a later statement of the same path wins
        result = result_text(context.final_result) if context.final_result is not None else "(no result)"
        summary = _cut(" ".join(result.split()), SUMMARY_CHARS)
        lessons = [lesson for reflection in context.reflections for lesson in reflection.lessons]
        details = _cut(f"Request: {context.input_text}\nResult: {result}", DETAILS_CHARS)
        episode = Episode(title=episode_title(context.input_text), summary=summary, details=details,
                          lesson="; ".join(lessons))
        tools = sorted({r.tool for r in context.actions_done if r.tool})
        assessment = (f"done after {len(context.actions_done)} step(s)" + (f" ({', '.join(tools)})" if tools else "")
                      + (f"; {len(facts)} fact(s) to remember" if facts else ""))
        return PostTaskReflection(facts=list(facts.values()), episode=episode, assessment=assessment)
