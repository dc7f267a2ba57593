"""A task's events as Server-Sent Events: framing, ids, and resuming with ``Last-Event-ID``.

An event's id is the transition's place among the task's transitions, from 1, as the store
keeps them (``history``'s ``seq``), so a client that reconnects with ``Last-Event-ID: n``
gets transitions n+1... replayed from the store, then the live ones.  A stream subscribes
before it reads the history: the notices that arrived meanwhile are transitions the history
holds already and are skipped (``Numbering``).  Streamed model text (``TextDelta``) is never
stored, so it has no id (an SSE event without one keeps the last id).
"""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass
from typing import Any

from pegasus.gateway.errors import ApiError
from pegasus.metadata import INT64_MAX
from pegasus.task.names import MachineName

TRANSITION = "transition"
DELTA = "delta"
END = "end"


def frame(data: Any, *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One SSE event: ``id``, ``event`` and ``data`` (JSON on one line) lines, a blank line."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str) -> bytes:
    """A comment line: keeps a quiet connection open through proxies."""
    return f": {text}\n\n".encode("utf-8")


def last_event_id(header: str | None) -> int:
    """The ``Last-Event-ID`` header as a number (0: none); ApiError 400 when it is not one of ours."""
    if header is None or not header.strip():
        return 0
    text = header.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= INT64_MAX):
        raise ApiError(400, "bad_request", f"Last-Event-ID: {header[:40]!r} is not an event id of this API")
    return int(text)


def ordered(history: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's transitions, lifecycle and cognitive, in the order stored (``seq``), as events carry them."""
    lifecycle = [{"seq": t["seq"], "machine": MachineName.LIFECYCLE.value, "from_state": t["from_state"],
                  "to_state": t["to_state"], "event": t["trigger_event_type"], "timestamp": t["timestamp"],
                  "detail": {"reason": t["reason"]} if t.get("reason") else {}}
                 for t in history.get("lifecycle", [])]
    cognitive = [{"seq": t["seq"], "machine": t.get("machine", ""), "from_state": t["from_state"],
                  "to_state": t["to_state"], "event": t["event"], "timestamp": t["timestamp"], "detail": {}}
                 for t in history.get("cognitive", [])]
    return sorted(lifecycle + cognitive, key=lambda t: int(t["seq"]))


def as_data(notice: Any) -> dict[str, Any]:
    """A notice (``TransitionNotice``, ``TextDelta``) as the JSON an event carries."""
    return asdict(notice) if is_dataclass(notice) and not isinstance(notice, type) else dict(notice)


class Numbering:
    """Ids of one stream's events: the history's, then the live transitions' after it.

    ``duplicates``: how many transitions were received live before the history was read (it holds them).
    """

    def __init__(self, history: dict[str, Any], task_id: str, duplicates: int = 0) -> None:
        self.task_id = task_id
        self.stored = ordered(history)
        self.next_id = len(self.stored) + 1
        self.duplicates = duplicates

    def replay(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        """The stored transitions after event ``after``, with their ids."""
        return [(int(t["seq"]), {"task_id": self.task_id, **{k: v for k, v in t.items() if k != "seq"}})
                for t in self.stored if int(t["seq"]) > after]

    def live(self, is_transition: bool) -> int | None:
        """The id of the next live notice: None for streamed text (no id), 0 for a transition the history
        held already (skip it), else the next id."""
        if not is_transition:
            return None
        if self.duplicates > 0:
            self.duplicates -= 1
            return 0
        event_id = self.next_id
        self.next_id += 1
        return event_id
