"""Recall before think / reason: when a run asks the supervisor for memories, and what it asks.

Once per iteration, before its first think (classic) or reason (reason_act) stage, when ``[memory]
recall_k`` is above 0; the answer goes in ``TaskContext.recall`` before the stage is sent.  Pure.
"""

from __future__ import annotations

from typing import Any

from pegasus.task.models import Recall, TaskContext
from pegasus.task.names import StageName

RECALL_STAGES = frozenset({StageName.THINK, StageName.REASON})
QUERY_CHARS = 2000  # the input, the user's messages and the perception's text, cut here


def needs_recall(stage: str, context: TaskContext, k: int) -> bool:
    """Whether ``stage`` must wait for a recall: a think / reason stage whose iteration has none yet."""
    if k <= 0 or stage not in RECALL_STAGES:
        return False
    return context.recall is None or context.recall.iteration != context.iteration


def recall_query(context: TaskContext) -> str:
    """The text the memories are searched for: the input, the user's messages, the perception's words."""
    parts = [context.input_text]
    parts += [str(m.get("content") or "") for m in context.messages if m.get("role", "user") == "user"]
    if context.perception:
        parts += list(_strings(context.perception))
    return " ".join(part.strip() for part in parts if part and part.strip())[:QUERY_CHARS]


def _strings(value: Any, depth: int = 0) -> list[str]:
    """The text leaves of a perception (an llm one's summary and entities; an offline one's intents)."""
    if depth > 4:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() if key not in ("sources", "task_type") for s in _strings(item, depth + 1)]
    if isinstance(value, list):
        return [s for item in value[:20] for s in _strings(item, depth + 1)]
    return []


def recalled(iteration: int, identity: str, items: list[dict[str, Any]], error: str | None = None) -> Recall:
    """The context's record of one recall, from the supervisor's answer (items: id, kind, title, text, score)."""
    return Recall.model_validate({"iteration": iteration, "identity": identity, "memories": items, "error": error})
