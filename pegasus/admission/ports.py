"""What Admission writes through: the store port, and a store that remembers nothing (unit tests)."""

from __future__ import annotations

from typing import Any, Protocol

from pegasus import codec
from pegasus.idempotency import Claim
from pegasus.store.journal import FINISHED
from pegasus.store.tree import Link


class StorePort(Protocol):
    """What Admission writes through (pegasus.store.Store implements it)."""

    durable: bool

    def create_task(self, row: dict[str, Any], checkpoint: bytes, claim: Claim | None = None) -> None: ...
    def claimed(self, scope: str, key: str) -> dict[str, Any] | None: ...
    def lifecycle_transition(self, task_id: str, expected: str, target: str, event: str, *, actor: str,
                             reason: str, metadata: dict[str, Any] | None = None,
                             updates: dict[str, Any] | None = None, run: int = 0) -> None: ...
    def add_checkpoint(self, task_id: str, run: int, kind: str, state: str, data: bytes) -> None: ...
    def unfinished_tasks(self, set_aside: Any = None) -> list[dict[str, Any]]: ...
    def task_row(self, task_id: str) -> dict[str, Any] | None: ...
    def counts(self) -> dict[str, int]: ...
    def checkpoints(self, task_id: str) -> list[Any]: ...
    def transitions(self, task_id: str) -> list[dict[str, Any]]: ...
    def journal(self, task_id: str) -> dict[str, dict[str, Any]]: ...
    def seq_high_water(self) -> int: ...
    def update_task(self, task_id: str, **updates: Any) -> None: ...
    def add_message(self, task_id: str, text: str) -> int: ...
    def messages_after(self, task_id: str, seq: int, max_bytes: int | None = None) -> list[tuple[int, str]]: ...
    def message_totals(self, task_id: str) -> tuple[int, int]: ...
    # The task tree (pegasus.store.tree)
    def link_of(self, child_id: str) -> Link | None: ...
    def children_of(self, parent_id: str) -> list[Link]: ...
    def finish_step(self, task_id: str, run: int, key: str, step_index: int, result: bytes) -> bool: ...


class NullStore:
    """Remembers nothing but the task tree: Admission without durability (unit tests)."""

    durable = False
    messages_sent = 0

    def __init__(self) -> None:
        self._links: dict[str, Link] = {}
        self._steps: dict[str, dict[str, dict[str, Any]]] = {}  # sub_task step ends, per parent
        self._messages: dict[str, tuple[int, int]] = {}  # per task: count and bytes (the caps are checked on them)

    def counts(self) -> dict[str, int]:
        return {}

    def create_task(self, row: dict[str, Any], checkpoint: bytes, claim: Claim | None = None) -> None:
        if row.get("link") is not None:
            self._links[row["task_id"]] = row["link"]

    def claimed(self, scope: str, key: str) -> dict[str, Any] | None:
        return None  # no store, no keys: every submit is new

    def lifecycle_transition(self, task_id: str, expected: str, target: str, event: str, **kwargs: Any) -> None:
        pass

    def add_checkpoint(self, task_id: str, run: int, kind: str, state: str, data: bytes) -> None:
        pass

    def unfinished_tasks(self, set_aside: Any = None) -> list[dict[str, Any]]:
        return []

    def task_row(self, task_id: str) -> dict[str, Any] | None:
        return None

    def checkpoints(self, task_id: str) -> list[Any]:
        return []

    def transitions(self, task_id: str) -> list[dict[str, Any]]:
        return []

    def journal(self, task_id: str) -> dict[str, dict[str, Any]]:
        return dict(self._steps.get(task_id, {}))

    def link_of(self, child_id: str) -> Link | None:
        return self._links.get(child_id)

    def children_of(self, parent_id: str) -> list[Link]:
        return [link for link in self._links.values() if link.parent_id == parent_id]

    def finish_step(self, task_id: str, run: int, key: str, step_index: int, result: bytes) -> bool:
        steps = self._steps.setdefault(task_id, {})
        if key in steps:
            return False
        steps[key] = {"key": key, "task_id": task_id, "run": run, "step_index": step_index, "tool": "sub_task",
                      "effect": "effectful", "status": FINISHED, "result": codec.unpack(result)}
        return True

    def seq_high_water(self) -> int:
        return 0

    def update_task(self, task_id: str, **updates: Any) -> None:
        pass

    def add_message(self, task_id: str, text: str) -> int:
        # Numbers still count up (per store, not per task: only their order matters here).
        self.messages_sent += 1
        count, size = self._messages.get(task_id, (0, 0))
        self._messages[task_id] = (count + 1, size + len(text.encode()))
        return self.messages_sent

    def message_totals(self, task_id: str) -> tuple[int, int]:
        return self._messages.get(task_id, (0, 0))

    def messages_after(self, task_id: str, seq: int, max_bytes: int | None = None) -> list[tuple[int, str]]:
        return []
