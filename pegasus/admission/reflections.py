"""Who hands a done task's post-task reflection out, and what the supervisor makes of the answer.

Pure; the supervisor carries it out (docs/agent-memory-recall.md).  The task actor that saw the run
done hands it out when its report says so (``Held``; ``pegasus.run.reflections``); else, and once one
is lost (its worker or that task actor died), the supervisor does, at most ``limit`` at a time (the
rest wait here, never filling the pool's queue).  Hand-outs are counted in the store, so after a
restart pending ones go again, up to ``MAX_ATTEMPTS``; a late answer is dropped by token or sender.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pegasus.task.models import PostTaskReflection

MAX_ATTEMPTS = 3
LOST = ("worker_died", "timeout")  # the answer of a worker that is gone: worth another hand-out


@dataclass(frozen=True)
class Dispatch:
    """Hand the task's reflection to the llm pool with ``token``."""

    task_id: str
    token: int


@dataclass(frozen=True)
class Held:
    """The task actor that saw the task done hands its reflection out, and reports the answer."""

    task_id: str


@dataclass(frozen=True)
class GiveUp:
    """Record the reflection failed: ``error`` says why (the task stays done)."""

    task_id: str
    error: str


@dataclass(frozen=True)
class Again:
    """Hand the reflection out once more (its worker died or overran: it may answer next time)."""

    task_id: str


@dataclass(frozen=True)
class Keep:
    """Store the reflection, and write its facts and episode to memory, with the done-marker."""

    task_id: str
    reflection: PostTaskReflection


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

    def _known(self, task_id: str) -> bool:
        return task_id in self.in_flight or task_id in self._waiting or task_id in self.held

    def want(self, task_id: str) -> list[str]:
        """A done task's reflection is due: queued; the tasks whose reflection may go out now."""
        if not self._known(task_id):
            self.waiting.append(task_id)
            self._waiting.add(task_id)
        return self.release()

    def again(self, task_id: str) -> None:
        """A reflection whose worker was lost (``Again``): first in line, since it was out already."""
        if not self._known(task_id):
            self.waiting.appendleft(task_id)
            self._waiting.add(task_id)

    def held_by(self, task_id: str, holder: Any, attempts: int) -> Held | GiveUp:
        """The task actor at ``holder`` handed the reflection out (hand-out ``attempts``, counted already)."""
        if self._known(task_id):  # (never: a task is done once) the one out already stays the one answered
            return Held(task_id)
        if attempts > MAX_ATTEMPTS:
            return GiveUp(task_id, f"gave up: the reflector was handed out {MAX_ATTEMPTS} times and never answered")
        self.held[task_id] = holder
        self.task_actor_hand_outs += 1
        return Held(task_id)

    def holder_lost(self, holder: Any) -> list[str]:
        """The task actor at ``holder`` is gone, and the answers it held with it: those reflections are
        the supervisor's now, first in line (``release`` hands them out)."""
        lost = [task_id for task_id, known in self.held.items() if known == holder]
        for task_id in reversed(lost):
            del self.held[task_id]
            self.again(task_id)
        return lost

    def release(self) -> list[str]:
        """The waiting tasks that fit under ``limit`` now (each to be counted, then ``handed_out``)."""
        going = []
        while self.waiting and len(self.in_flight) < self.limit:
            task_id = self.waiting.popleft()
            self._waiting.discard(task_id)
            self.in_flight[task_id] = 0
            going.append(task_id)
        return going

    def dropped(self, task_id: str) -> None:
        """A reflection that cannot go out (its task's checkpoints will not rebuild): no longer in flight."""
        self.in_flight.pop(task_id, None)

    def handed_out(self, task_id: str, attempts: int) -> Dispatch | GiveUp:
        """The hand-out numbered ``attempts`` (counted in the store already)."""
        if attempts > MAX_ATTEMPTS:
            self.in_flight.pop(task_id, None)
            return GiveUp(task_id, f"gave up: the reflector was handed out {MAX_ATTEMPTS} times and never answered")
        self.next_token += 1
        self.in_flight[task_id] = self.next_token
        self.hand_outs += 1
        return Dispatch(task_id, self.next_token)

    def answered(self, task_id: str, token: int, ok: bool, payload: dict[str, Any], error: str | None,
                 error_kind: str = "") -> Keep | GiveUp | Again | None:
        """What an answer comes to; None when it is stale (not the latest hand-out's)."""
        if self.in_flight.get(task_id) != token:
            return None
        del self.in_flight[task_id]
        return _decided(task_id, ok, payload, error, error_kind)

    def answered_by(self, task_id: str, holder: Any, ok: bool, payload: dict[str, Any], error: str | None,
                    error_kind: str = "") -> Keep | GiveUp | Again | None:
        """What a task actor's answer comes to; None when that actor does not hold the reflection (any more)."""
        if task_id not in self.held or self.held[task_id] != holder:
            return None
        del self.held[task_id]
        return _decided(task_id, ok, payload, error, error_kind)

    def view(self) -> dict[str, int]:
        """For stats: out and waiting (the supervisor's), held by task actors; hand-outs of each so far."""
        return {"out": len(self.in_flight), "waiting": len(self.waiting), "held": len(self.held),
                "handed_out": self.hand_outs, "handed_out_by_task_actors": self.task_actor_hand_outs}


def _decided(task_id: str, ok: bool, payload: dict[str, Any], error: str | None,
             error_kind: str) -> Keep | GiveUp | Again:
    """What an answer that is not stale comes to."""
    if not ok and error_kind in LOST:
        return Again(task_id)
    if not ok:
        return GiveUp(task_id, f"the reflector failed: {error or 'no reason given'}")
    try:
        return Keep(task_id, PostTaskReflection.model_validate(payload.get("post_reflection")))
    except ValidationError as exc:
        return GiveUp(task_id, f"the reflector's answer is not a PostTaskReflection: {exc.error_count()} error(s): "
                               f"{exc.errors()[0]['msg']}")
