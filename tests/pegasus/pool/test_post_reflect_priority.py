"""The post-task reflector's stage is the llm pool's lowest priority: it never delays a task's stage."""

from __future__ import annotations

from pegasus.pool.inputs import Reported
from pegasus.task.names import StageName
from tests.support.pool_core import Pool, dispatched

LOW = StageName.POST_REFLECT


def test_a_reflection_waits_behind_every_stage_queued_after_it() -> None:
    pool = Pool(size=1)
    sent = pool.ask("a") + pool.ask("r1", stage=LOW) + pool.ask("b") + pool.ask("r2", stage=LOW) + pool.ask("c")
    assert dispatched(sent) == [("a", "w1", 1)]
    assert dispatched(pool.finish(1)) == [("b", "w1", 2)]  # not r1, queued before b
    assert dispatched(pool.finish(2)) == [("c", "w1", 3)]
    assert dispatched(pool.finish(3)) == [("r1", "w1", 4)]  # nothing else waits: the reflections, in order
    assert dispatched(pool.finish(4)) == [("r2", "w1", 5)]


def test_an_idle_worker_runs_a_reflection_at_once() -> None:
    pool = Pool(size=2)
    assert dispatched(pool.ask("r1", stage=LOW)) == [("r1", "w1", 1)]


def test_a_reflection_is_never_prefetched_behind_a_busy_worker() -> None:
    """Held in a worker's mailbox, it would run before a stage that arrives later."""
    pool = Pool(size=1, prefetch=1)
    pool.step(Reported(0, 4242, "host", "w1"))
    assert dispatched(pool.ask("a") + pool.ask("r1", stage=LOW)) == [("a", "w1", 1)]
    assert dispatched(pool.ask("b")) == [("b", "w1", 2)]  # held next: the reflection still waits
    assert dispatched(pool.finish(1)) == []  # w1 runs b now, busy: r1 is not held behind it
    assert dispatched(pool.finish(2)) == [("r1", "w1", 3)]
