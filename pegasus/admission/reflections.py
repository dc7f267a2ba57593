"""Who hands a done task's post-task reflection out, and what the supervisor makes of the answer.

``step(input) -> [command]``, never raising; the supervisor carries it out (docs/agent-memory-recall.md).
The task actor that saw the run done hands it out when its report says so (``HeldBy``;
``pegasus.run.reflections``); else, and once one
is lost (its worker or that task actor died), the supervisor does, at most ``limit`` at a time (the
rest wait here, never filling the pool's queue).  Hand-outs are counted in the store, so after a
restart pending ones go again, up to ``MAX_ATTEMPTS``; a late answer is dropped by token or sender.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pegasus.core_error import Log, error_log
from pegasus.task.models import PostTaskReflection

MAX_ATTEMPTS = 3
LOST = ("worker_died", "timeout")  # the answer of a worker that is gone: worth another hand-out


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Want:
    """A done task's reflection is due: queued (the supervisor hands it out when it fits under ``limit``)."""

    task_id: str


@dataclass(frozen=True)
class HeldBy:
    """The task actor at ``holder`` handed the reflection out (hand-out ``attempts``, counted already)."""

    task_id: str
    holder: Any
    attempts: int


@dataclass(frozen=True)
class HolderLost:
    """The task actor at ``holder`` is gone, and the answers it held with it."""

    holder: Any


@dataclass(frozen=True)
class HandedOut:
    """``Count`` counted hand-out ``attempts`` of the task's reflection in the store."""

    task_id: str
    attempts: int


@dataclass(frozen=True)
class Dropped:
    """A reflection that cannot go out (its task's checkpoints will not rebuild): no longer in flight."""

    task_id: str


@dataclass(frozen=True)
class Answered:
    """The llm pool's answer to the supervisor's hand-out ``token``."""

    task_id: str
    token: int
    ok: bool
    payload: dict[str, Any]
    error: str | None
    error_kind: str = ""


@dataclass(frozen=True)
class AnsweredBy:
    """A task actor's answer (in its reports), from ``holder``."""

    task_id: str
    holder: Any
    ok: bool
    payload: dict[str, Any]
    error: str | None
    error_kind: str = ""


ReflectionInput = Want | HeldBy | HolderLost | HandedOut | Dropped | Answered | AnsweredBy


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Count:
    """Count a hand-out of the task's reflection in the store; step ``HandedOut`` with the count."""

    task_id: str


@dataclass(frozen=True)
class Dispatch:
    """Hand the task's reflection to the llm pool with ``token``."""

    task_id: str
    token: int


@dataclass(frozen=True)
class GiveUp:
    """Record the reflection failed: ``error`` says why (the task stays done)."""

    task_id: str
    error: str


@dataclass(frozen=True)
class Keep:
    """Store the reflection, and write its facts and episode to memory, with the done-marker."""

    task_id: str
    reflection: PostTaskReflection


@dataclass(frozen=True)
class TakenBack:
    """A dead task actor's reflections are the supervisor's now (first in line)."""

    task_ids: tuple[str, ...]


ReflectionCommand = Count | Dispatch | GiveUp | Keep | TakenBack | Log


@dataclass(frozen=True)
class _Again:
    """An answer's decision: hand the reflection out once more (its worker died or overran)."""

    task_id: str


@dataclass
class PostReflections:
    """The reflections out (task -> the token of its latest hand-out; 0: about to go), those waiting,
    and those task actors hold (task -> the task actor, an opaque address)."""

    limit: int = 1
    in_flight: dict[str, int] = field(default_factory=dict)
    waiting: deque[str] = field(default_factory=deque)
    next_token: int = 0
    held: dict[str, Any] = field(default_factory=dict)
    hand_outs: int = 0  # by the supervisor, since its start (stats)
    task_actor_hand_outs: int = 0  # by task actors, since its start (stats)
    _waiting: set[str] = field(default_factory=set)  # (membership: thousands may wait behind a burst)

    def step(self, event: ReflectionInput) -> list[ReflectionCommand]:
        try:
            return self._step(event)
        except Exception as exc:  # noqa: BLE001 - a reflection must never take the supervisor down; nothing is decided
            return [error_log("post_reflections", event, exc)]

    def _step(self, event: ReflectionInput) -> list[ReflectionCommand]:
        if isinstance(event, Want):
            if not self._known(event.task_id):
                self.waiting.append(event.task_id)
                self._waiting.add(event.task_id)
            return self._release()
        if isinstance(event, HeldBy):
            return self._held_by(event)
        if isinstance(event, HolderLost):
            return self._holder_lost(event.holder)
        if isinstance(event, HandedOut):
            return self._handed_out(event.task_id, event.attempts)
        if isinstance(event, Dropped):
            self.in_flight.pop(event.task_id, None)
            return self._release()
        if isinstance(event, Answered):
            if self.in_flight.get(event.task_id) != event.token:
                return []  # stale: not the latest hand-out's
            del self.in_flight[event.task_id]
            return self._decided(_decided(event.task_id, event.ok, event.payload, event.error, event.error_kind))
        if isinstance(event, AnsweredBy):
            if event.task_id not in self.held or self.held[event.task_id] != event.holder:
                return []  # that actor does not hold the reflection (any more)
            del self.held[event.task_id]
            return self._decided(_decided(event.task_id, event.ok, event.payload, event.error, event.error_kind))
        return []

    def _known(self, task_id: str) -> bool:
        return task_id in self.in_flight or task_id in self._waiting or task_id in self.held

    def _again(self, task_id: str) -> None:
        """A reflection whose worker was lost: first in line, since it was out already."""
        if not self._known(task_id):
            self.waiting.appendleft(task_id)
            self._waiting.add(task_id)

    def _held_by(self, event: HeldBy) -> list[ReflectionCommand]:
        if self._known(event.task_id):  # (never: a task is done once) the one out already stays the one answered
            return []
        if event.attempts > MAX_ATTEMPTS:
            return [GiveUp(event.task_id, _GAVE_UP)]
        self.held[event.task_id] = event.holder
        self.task_actor_hand_outs += 1
        return []

    def _holder_lost(self, holder: Any) -> list[ReflectionCommand]:
        lost = [task_id for task_id, known in self.held.items() if known == holder]
        if not lost:
            return []
        for task_id in reversed(lost):
            del self.held[task_id]
            self._again(task_id)
        return [TakenBack(tuple(lost)), *self._release()]

    def _release(self) -> list[ReflectionCommand]:
        """The waiting tasks that fit under ``limit`` now: each counted, then handed out."""
        going: list[ReflectionCommand] = []
        while self.waiting and len(self.in_flight) < self.limit:
            task_id = self.waiting.popleft()
            self._waiting.discard(task_id)
            self.in_flight[task_id] = 0
            going.append(Count(task_id))
        return going

    def _handed_out(self, task_id: str, attempts: int) -> list[ReflectionCommand]:
        if attempts > MAX_ATTEMPTS:
            self.in_flight.pop(task_id, None)
            return [GiveUp(task_id, _GAVE_UP), *self._release()]
        self.next_token += 1
        self.in_flight[task_id] = self.next_token
        self.hand_outs += 1
        return [Dispatch(task_id, self.next_token)]

    def _decided(self, decision: Keep | GiveUp | _Again) -> list[ReflectionCommand]:
        if isinstance(decision, _Again):
            self._again(decision.task_id)
            return self._release()
        return [decision, *self._release()]

    def view(self) -> dict[str, int]:
        """For stats: out and waiting (the supervisor's), held by task actors; hand-outs of each so far."""
        return {"out": len(self.in_flight), "waiting": len(self.waiting), "held": len(self.held),
                "handed_out": self.hand_outs, "handed_out_by_task_actors": self.task_actor_hand_outs}


_GAVE_UP = f"gave up: the reflector was handed out {MAX_ATTEMPTS} times and never answered"


def _decided(task_id: str, ok: bool, payload: dict[str, Any], error: str | None,
             error_kind: str) -> Keep | GiveUp | _Again:
    """What an answer that is not stale comes to."""
    if not ok and error_kind in LOST:
        return _Again(task_id)
    if not ok:
        return GiveUp(task_id, f"the reflector failed: {error or 'no reason given'}")
    try:
        return Keep(task_id, PostTaskReflection.model_validate(payload.get("post_reflection")))
    except ValidationError as exc:
        return GiveUp(task_id, f"the reflector's answer is not a PostTaskReflection: {exc.error_count()} error(s): "
                               f"{exc.errors()[0]['msg']}")
