"""What ``context`` answers for a task: the parts of its context a person reads (plan, steps' results,
reflections, memories), with long texts cut so one answer stays small.

Pure: a snapshot in (``pegasus.store.checkpoint.rebuild``), plain data out.
"""

from __future__ import annotations

from typing import Any

from pegasus.task.models import TaskSnapshot

MAX_TEXT = 4000  # characters of one output, error or text kept; the rest is counted, not sent

# The task's view (``get``) has these already.
INPUT_FIELDS = frozenset({"input_text", "input_metadata", "source", "suspended_state"})


def clipped(value: Any, limit: int = MAX_TEXT) -> Any:
    """``value`` with every string longer than ``limit`` cut, saying how much was left out."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}... [{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {key: clipped(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [clipped(item, limit) for item in value]
    return value


def context_view(task_id: str, snapshot: TaskSnapshot | None) -> dict[str, Any]:
    """The task's context as its last checkpoint holds it (None: no checkpoint yet)."""
    if snapshot is None:
        return {"task_id": task_id, "state": None, "context": {}}
    context = snapshot.context.model_dump(mode="json")
    # Every other field comes along, those later issues add too (the memories given to the task, say).
    shown = {key: value for key, value in context.items() if key not in INPUT_FIELDS}
    return {"task_id": task_id, "state": snapshot.state, "context": clipped(shown)}
