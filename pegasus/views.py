"""What ``get`` and ``history`` answer for a task the store holds: plain data built from its rows.

Pure: the rows come in (``Store.task_row``, ``Store.transitions``, ``Store.audit``), dicts go out.
"""

from __future__ import annotations

from typing import Any

from pegasus.llm.cost import usage_sum
from pegasus.task.names import MachineName


def usage_total(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """Token usage of a task: the sum over its stages' reported usage (LLM calls), with its cost when
    its models have prices (``pegasus.llm.cost.usage_sum``)."""
    return usage_sum(stage.get("usage") for stage in stages)


def stored_view(task_id: str, row: dict[str, Any], transitions: list[dict[str, Any]]) -> dict[str, Any]:
    """A task no longer in the supervisor's memory (done, canceled, from before a restart), as ``get`` answers."""
    stages = [{"run": t["run"], **t["detail"]} for t in transitions
              if t["machine"] != MachineName.LIFECYCLE and t["detail"].get("stage")]
    return {"task_id": task_id, "machine": row["machine"], "priority": row["priority"],
            "lifecycle_state": row["lifecycle_state"], "state": row["cognitive_state"], "input": row["input"],
            "source": row["source"], "metadata": row["metadata"] or {}, "result": row["result"],
            "error": row["error"], "exit_reason": row["exit_reason"], "attempts": row["attempts"],
            "runs": row["runs"], "created_at": row["created_at"], "updated_at": row["updated_at"],
            "stages": stages, "usage": usage_total(stages), "gates": [], "question": None,
            "iteration": None, "suspend_reason": None, "actor_pid": None, "from_store": True}


def history_view(task_id: str, transitions: list[dict[str, Any]], audit: list[dict[str, Any]]) -> dict[str, Any]:
    """Every lifecycle and cognitive transition of a task, and its audit log, as ``history`` answers."""
    # seq: the transition's place among all the task's transitions, from 1, as stored (and as streamed live:
    # the HTTP gateway's event ids, resumable with Last-Event-ID)
    lifecycle = [{"from_state": t["from_state"], "to_state": t["to_state"], "trigger_event_type": t["event"],
                  "timestamp": t["timestamp"], "reason": t["detail"].get("reason", ""), "seq": seq}
                 for seq, t in enumerate(transitions, 1) if t["machine"] == MachineName.LIFECYCLE]
    cognitive = [{"run": t["run"], "from_state": t["from_state"], "to_state": t["to_state"], "event": t["event"],
                  "timestamp": t["timestamp"], "seq": seq, "machine": t["machine"],
                  # what the context budget did to the stage's prompt (pegasus.llm.context), when it did
                  **({"context": t["detail"]["context"]} if t["detail"].get("context") else {}),
                  # the memories a think / reason stage was given (issue 19): why it answered as it did
                  **({"memories": t["detail"]["memories"]} if t["detail"].get("memories") else {}),
                  # the recalled episode of the same request (issue 31): here, never appended to the result
                  **({"done_before": t["detail"]["done_before"]} if t["detail"].get("done_before") else {})}
                 for seq, t in enumerate(transitions, 1) if t["machine"] != MachineName.LIFECYCLE]
    return {"task_id": task_id, "lifecycle": lifecycle, "cognitive": cognitive, "audit": audit}
