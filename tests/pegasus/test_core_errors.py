"""A pure core's own bug is not swallowed in silence: its ``step`` answers an ERROR ``<core>_error`` line with
the input's type and the exception (its traceback rendered by the log), which its carrier writes."""

from __future__ import annotations

from typing import Any

import pytest

from pegasus import logs
from pegasus.admission.reflections import PostReflections, Want
from pegasus.core_error import Log
from pegasus.guardian import GuardianCore, Locate
from pegasus.levels import Level
from pegasus.memory.vectors import Ask, Asking, Backfill, Breaker, Restored
from pegasus.pool.looks import PoolLooks, Work
from pegasus.run.hosts import Place, TaskHosts


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise KeyError("a bug")


CORES = [  # (the core, the handler made to raise, an input it takes there, its log event)
    (lambda: TaskHosts(), "_place", Place("t1", 1, 0.0), "task_hosts_error"),
    (lambda: PostReflections(), "_step", Want("t1"), "post_reflections_error"),
    (lambda: Backfill(60.0, 10, 5.0), "_arm", Restored(), "vectors_backfill_error"),
    (lambda: PoolLooks(), "_work", Work(), "pool_looks_error"),
    (lambda: GuardianCore(), "_locate", Locate("client", "r1", 0.0), "guardian_core_error"),
]


@pytest.mark.parametrize(("make", "handler", "event", "name"), CORES, ids=[c[3] for c in CORES])
def test_a_handler_that_raises_answers_an_error_line(monkeypatch: pytest.MonkeyPatch, make: Any, handler: str,
                                                    event: object, name: str) -> None:
    core = make()
    monkeypatch.setattr(core, handler, _raise)
    [line] = core.step(event)
    assert isinstance(line, Log) and line.level is Level.ERROR and line.event == name
    assert line.fields["input_type"] == type(event).__name__ and line.fields["error"] == "KeyError: 'a bug'"
    assert isinstance(line.fields["exc_info"], KeyError) and line.fields["exc_info"].__traceback__ is not None


def test_a_breaker_that_raises_says_so_and_the_recall_still_asks() -> None:
    breaker = Breaker(open_until=None)  # type: ignore[arg-type]  # not comparable with a time: a bug
    [line, asked] = breaker.step(Asking(1.0))
    assert line.event == "embeddings_breaker_error" and line.fields["input_type"] == "Asking" and asked == Ask()


def test_the_carrier_writes_the_lines_and_carries_out_the_rest() -> None:
    written: list[tuple] = []

    class Recorder:
        def log(self, level: int, event: str, **fields: Any) -> None:
            written.append((level, event, fields))

    line = Log(Level.ERROR, "pool_looks_error", {"input_type": "Work"})
    assert logs.emitted(Recorder(), [Ask(), line, Work()]) == [Ask(), Work()]
    assert written == [(Level.ERROR, "pool_looks_error", {"input_type": "Work"})]
