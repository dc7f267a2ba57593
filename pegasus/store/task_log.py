"""A task's log (``pegasus logs ID``, ``GET /v1/tasks/{id}/logs``): what happened to it, in order.

Every entry comes from a stored transition (its ``id`` is the cursor ``after`` takes): a
``transition``, an ``error``, a ``step_down`` (the capability ladder) or a ``tool`` step's output;
effects whose outcome is unknown come last.  Pure over the store: ``task_log(store, request, now)``.
"""

from __future__ import annotations

from typing import Any

from pegasus import codec
from pegasus.views import clipped
from pegasus.store.checkpoint import rebuild

MAX_ENTRIES = 500  # transitions read for one answer (each makes 1-3 entries); ``next`` is the cursor for the rest
TERMINAL = ("done", "failed", "canceled")


def _tool_entries(store: Any, task_id: str) -> list[dict[str, Any]]:
    rows = store.checkpoints(task_id)
    if not rows:
        return []
    try:
        done = rebuild(task_id, rows).context.actions_done
    except Exception:  # noqa: BLE001 - a checkpoint that will not rebuild loses the outputs, not the log
        return []
    return [{"kind": "tool", "step_index": action.step_index, "tool": action.tool or action.action_type,
             "success": action.success,
             "output": clipped(action.output), "error": clipped(action.error), "duration_ms": action.duration_ms}
            for action in done]


def _entries_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries one transition makes: itself, its stage's error, its model's step-downs."""
    detail = row["detail"] or {}
    base = {"id": row["id"], "at": row["at"], "run": row["run"], "machine": row["machine"]}
    entry: dict[str, Any] = {**base, "kind": "transition", "from_state": row["from_state"],
                             "to_state": row["to_state"], "event": row["event"]}
    if isinstance(detail.get("reason"), str):
        entry["reason"] = detail["reason"]
    if isinstance(detail.get("stage"), str):
        entry["stage"] = detail["stage"]
        started, finished = detail.get("started"), detail.get("finished")
        if isinstance(started, (int, float)) and isinstance(finished, (int, float)):
            entry["seconds"] = round(max(0.0, finished - started), 3)
        if isinstance(detail.get("pid"), int):
            entry["worker"] = f"{detail.get('pool')}#{detail.get('index')} pid {detail['pid']}"
    out = [entry]
    if detail.get("error") or detail.get("ok") is False:
        out.append({**base, "kind": "error", "stage": detail.get("stage"), "error": clipped(str(detail.get("error")))})
    usage = detail.get("usage")
    for change in (usage.get("ladder") or []) if isinstance(usage, dict) else []:
        out.append({**base, "kind": "step_down", "stage": detail.get("stage"), "change": clipped(str(change))})
    return out


def task_log(store: Any, request: Any, now: float) -> dict[str, Any]:
    """``TaskLog``: the entries after transition ``request.after``, oldest first (``next``: the cursor to ask
    with for more; ``finished``: the task has ended, nothing more will come)."""
    from pegasus.task.errors import TaskNotFoundError
    row = store.task_row(request.task_id, lenient=True)
    if row is None:
        raise TaskNotFoundError(request.task_id)
    rows = store._query("SELECT id, machine, run, from_state, to_state, event, detail, created_at FROM transitions"
                        " WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?",
                        (request.task_id, request.after, MAX_ENTRIES + 1))
    more = len(rows) > MAX_ENTRIES
    rows = rows[:MAX_ENTRIES]
    last_run = max((r[2] for r in rows if r[1] != "lifecycle"), default=None)
    tools = _tool_entries(store, request.task_id) if last_run is not None else []
    last_run_act_ids = store._query(
        "SELECT id FROM transitions WHERE task_id = ? AND machine != 'lifecycle' AND run = ? AND from_state = 'acting'"
        " ORDER BY id", (request.task_id, last_run)) if tools else []
    tool_after = {act_id: tool for (act_id,), tool in zip(last_run_act_ids, tools)}
    entries: list[dict[str, Any]] = []
    for r in rows:
        try:
            detail = codec.unpack(r[6]) if r[6] is not None else {}
        except codec.UNPACK_ERRORS:  # one unreadable detail is shown empty, the log goes on
            detail = {}
        transition = {"id": r[0], "machine": r[1], "run": r[2], "from_state": r[3], "to_state": r[4],
                      "event": r[5], "detail": detail if isinstance(detail, dict) else {}, "at": r[7]}
        entries += _entries_of(transition)
        if r[0] in tool_after:
            entries.append({"id": r[0], "at": r[7], "run": r[2], "machine": r[1], **tool_after[r[0]]})
    state = row["lifecycle_state"]
    finished = state in TERMINAL and not more
    return {"task_id": request.task_id, "lifecycle_state": state, "entries": entries,
            "next": rows[-1][0] if rows else request.after, "more": more, "finished": finished,
            "effects_unknown": store.effects_unknown(request.task_id, run_over=state in TERMINAL) if finished else []}
