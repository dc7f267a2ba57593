"""Helpers for the pure-core tests: a fixed clock and id factory, FSMs in any state."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from pegasus.run import Command, RunSnapshot, Started, TaskRun
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


def start_run(state: RunSnapshot, *, resume_event: str | None = None, resume_payload: dict[str, Any] | None = None,
              **kwargs: Any) -> tuple[TaskRun, list[Command]]:
    """A run built from ``state`` and started: ``TaskRun(state).step(Started(...))``, run and commands."""
    run = TaskRun(state, **kwargs)
    return run, run.step(Started(resume_event, dict(resume_payload or {})))
