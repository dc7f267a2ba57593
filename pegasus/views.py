"""What a system's read requests answer, as plain data built from what its parts hold: a stored task
(``get``, ``history``), its context (``context``) and the system's statistics (``stats``).

Pure: rows, snapshots and reports in (``Store``, ``pegasus.store.checkpoint.rebuild``, pool stats),
dicts out; no actors, no I/O.
"""

from __future__ import annotations

from typing import Any

from pegasus.llm.cost import usage_sum
from pegasus.pool import contact
from pegasus.task.models import TaskSnapshot
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
            "tier": submitted_tier(transitions),
            "stages": stages, "usage": usage_total(stages), "gates": [], "question": None,
            "iteration": None, "suspend_reason": None, "actor_pid": None, "from_store": True}


def submitted_tier(transitions: list[dict[str, Any]]) -> str | None:
    """The tier a task was submitted with, as its TASK_CREATED transition notes it (None: none given)."""
    return next((t["detail"].get("tier") for t in transitions if t["event"] == "TASK_CREATED"), None)


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
                  # the memories a think / reason stage was given: why it answered as it did
                  **({"memories": t["detail"]["memories"]} if t["detail"].get("memories") else {}),
                  # and why they were found by full text alone (the query got no vector)
                  **({"recall_error": t["detail"]["recall_error"]} if t["detail"].get("recall_error") else {}),
                  # the recalled episode of the same request: here, never appended to the result
                  **({"done_before": t["detail"]["done_before"]} if t["detail"].get("done_before") else {})}
                 for seq, t in enumerate(transitions, 1) if t["machine"] != MachineName.LIFECYCLE]
    return {"task_id": task_id, "lifecycle": lifecycle, "cognitive": cognitive, "audit": audit}


# The system's statistics (stats, /healthz).

def members_view(pools: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every convention member the pools know, with its workers per pool (for the stats reply).

    ``pools`` maps a pool name to its stats part (``members`` as in PoolStats).
    """
    merged: dict[str, dict[str, Any]] = {}
    for name, part in pools.items():
        for member in part.get("members", []):
            row = merged.setdefault(member["name"], {
                "name": member["name"], "address": member["address"], "local": member["local"],
                "capabilities": member["capabilities"], "joined": member["joined"], "workers": {}})
            row["workers"][name] = member["workers"]
            if member.get("contact") is not None:
                row.setdefault("contacts", []).append(member["contact"])
    for row in merged.values():  # each pool pings the member's workers: one view of how well it is heard
        row["contact"] = None if row["local"] else contact.merged(row.pop("contacts", []))
    return sorted(merged.values(), key=lambda row: (not row["local"], row["name"]))


def usage_view(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The model usage of every task so far (``Store.usage_totals`` rows): the total, with its cost when
    any model had a price, and each model and tier's share; ``estimated_calls`` where the server reported
    no usage (their cost is unknown, never 0)."""
    models = []
    for row in rows:
        model = {key: value for key, value in row.items()
                 if key not in ("cost_usd", "unpriced_calls", "estimated_calls")}
        if row.get("estimated_calls"):
            model["estimated_calls"] = row["estimated_calls"]
        if row.get("cost_usd") is not None:
            model["cost_usd"] = round(float(row["cost_usd"]), 8)
            if row.get("unpriced_calls"):
                model["unpriced_calls"] = row["unpriced_calls"]
        models.append(model)
    return {**usage_sum(models), "models": models}


def supervision_view(children: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A parent's view of its children (``Supervision.view``) for stats and /healthz: each one's restarts and
    status, and the names of those that crash-loop (more deaths within a period than their spec allows)."""
    return {"supervision": children,
            "crash_looping": sorted(name for name, child in children.items() if child.get("status") == "crash_looping")}


# A task's context (context).

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

