"""A pool core driven as its carrier drives it, with a hand-moved clock and string addresses (no actor system)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pegasus.config import Settings
from pegasus.pool.commands import Arm, Dispatch, PoolCommand, StartWorker
from pegasus.pool.core import PoolCore
from pegasus.pool.inputs import Configured, Created, Finished, PoolInput, Requested

ME = "leader:19000"
C = TypeVar("C")


@dataclass(frozen=True)
class Ask:
    """A stage request as the core reads it."""

    task_id: str
    token: int = 1
    stage: str = "think"
    timeout_s: float | None = None
    context: Any = None
    tier: str | None = None
    priority: int = 5
    journal_to: Any = None


@dataclass(frozen=True)
class Spec:
    """A PoolConfig as the core reads it."""

    name: str = "llm"
    size: int = 2
    queue_limit: int = 10
    timeout_s: float = 30.0
    settings: Settings = field(default_factory=Settings)
    prefetch: int = 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Pool:
    """``step`` answers each StartWorker with Created at a fresh address ``w1``, ``w2``... as the carrier does."""

    def __init__(self, spec: Spec | None = None, **overrides: Any) -> None:
        self.clock = Clock()
        self.core = PoolCore(self.clock, wall_clock=lambda: 1_700_000_000.0)
        self.addresses = (f"w{n}" for n in itertools.count(1))
        self.started = self.step(Configured(spec or Spec(**overrides), ME))

    def step(self, event: PoolInput) -> list[PoolCommand]:
        done: list[PoolCommand] = []
        for command in self.core.step(event):
            done.append(command)
            if isinstance(command, StartWorker):
                done += self.step(Created(command.index, next(self.addresses)))
        return done

    def ask(self, task_id: str, **fields: Any) -> list[PoolCommand]:
        return self.step(Requested(Ask(task_id, **fields), f"requester-{task_id}"))

    def finish(self, job: int, result: Any = None, **worker: Any) -> list[PoolCommand]:
        return self.step(Finished(job, result, worker))

    def fire(self, commands: list[PoolCommand], kind: type) -> list[PoolCommand]:
        """Move the clock to the timer of ``kind`` armed in ``commands`` and hand it back."""
        [arm] = [c for c in of(Arm, commands) if isinstance(c.timer, kind)]
        self.clock.now += arm.delay_s
        return self.step(arm.timer)


def of(kind: type[C], commands: list[PoolCommand]) -> list[C]:
    return [c for c in commands if isinstance(c, kind)]


def dispatched(commands: list[PoolCommand]) -> list[tuple[str, str, int]]:
    """(task, worker, job) of every Dispatch, in order."""
    return [(d.request.task_id, d.worker, d.job) for d in of(Dispatch, commands)]
