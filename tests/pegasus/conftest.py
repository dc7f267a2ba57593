"""Helpers for the pure-core tests: a fixed clock and id factory, FSMs in any state."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from pegasus.task import TaskContext, TaskFSM

EPOCH = datetime(2026, 1, 30, 10, 0, tzinfo=timezone.utc)


class FixedClock:
    """Ticks one second per call, from a fixed epoch: histories are reproducible."""

    def __init__(self) -> None:
        self.ticks = itertools.count()

    def __call__(self) -> datetime:
        return EPOCH + timedelta(seconds=next(self.ticks))


class Ids:
    def __init__(self, prefix: str = "id") -> None:
        self.prefix, self.counter = prefix, itertools.count(1)

    def __call__(self) -> str:
        return f"{self.prefix}-{next(self.counter)}"


def fsm_at(machine: str, state: str, context: TaskContext | None = None, **metadata: object) -> TaskFSM:
    return TaskFSM(machine, task_id="task-1", context=context or TaskContext(input_text="x"),
                   state=state, metadata=dict(metadata), clock=FixedClock(), id_factory=Ids())


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def ids() -> Ids:
    return Ids()
