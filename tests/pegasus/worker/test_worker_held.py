"""A worker never begins a held (prefetched) job its pool may have moved (issue 33): after a call of at least
half of the job's ``move_after_s`` (1 s here, as the pool stamps it) it asks its pool first (AskBegin) and runs
the job on a go, drops it when gone; after a short call, the common case, it begins at once with no message."""

from __future__ import annotations

from typing import Any

from pegasus.worker.commands import AskBegin, Exit, Free, Log, Return, Run
from pegasus.worker.inputs import AnswerLeft, BeginAnswered, Journalled, OrphanDue, Pinged, StopAsked
from tests.support.worker_core import POOL, Result, Worker, of


def kinds(commands: list[Any]) -> list[str]:
    return [type(c).__name__ for c in commands]


def worker_whose_calls_take(seconds: float, **options: Any) -> Worker:
    """A worker each of whose stages runs ``seconds`` by its clock."""
    worker: Worker

    def run(request: Any) -> Result:
        worker.clock.now += seconds
        return Result(f"ran {request.task_id}")

    worker = Worker(run=run, **options)
    return worker


def test_after_a_long_call_a_held_job_begins_only_on_its_pools_go() -> None:
    worker = worker_whose_calls_take(0.5)
    assert kinds(worker.ask(1)) == ["Run", "Answer", "Free"]
    out = worker.ask(2, held=True)
    assert out == [AskBegin(POOL, 2)]
    assert kinds(worker.ask(3, held=True)) == []  # behind the one asked about
    assert kinds(worker.step(BeginAnswered(2, True))) == ["Run", "Answer", "Free", "AskBegin"]  # 3: after 2's 0.5 s


def test_after_a_short_call_a_held_job_begins_at_once_with_no_message() -> None:
    worker = worker_whose_calls_take(0.49)
    worker.ask(1)
    assert kinds(worker.ask(2, held=True)) == ["Run", "Answer", "Free"]


def test_a_job_handed_to_an_idle_worker_is_never_asked_about() -> None:
    worker = worker_whose_calls_take(5.0)
    worker.ask(1)
    assert kinds(worker.ask(2)) == ["Run", "Answer", "Free"]


def test_a_held_job_its_pool_moved_is_dropped_unanswered_and_the_next_one_asked_about() -> None:
    worker = worker_whose_calls_take(2.0)
    worker.ask(1)
    assert worker.ask(2, held=True) == [AskBegin(POOL, 2)]
    worker.ask(3, held=True)
    out = worker.step(BeginAnswered(2, False))
    assert [log.event for log in of(Log, out)] == ["held_step_gone"] and out[1:] == [AskBegin(POOL, 3)]
    assert kinds(worker.step(BeginAnswered(2, True))) == []  # a second answer about it: nothing
    assert kinds(worker.step(BeginAnswered(3, True))) == ["Run", "Answer", "Free"]


def test_the_call_is_measured_until_the_pool_is_told_it_is_over() -> None:
    """The held job arrives before the answer before it has left: asked about once the pool is told (Free)."""
    worker = worker_whose_calls_take(0.3, answers_leave=False)
    assert kinds(worker.ask(1)) == ["Run", "Answer"]
    assert kinds(worker.ask(2, held=True)) == []
    worker.clock.now += 0.3  # the answer waits to leave: the pool still counts job 1 as running
    assert worker.step(AnswerLeft(1)) == [Free(POOL, 1, {}), AskBegin(POOL, 2)]


def test_a_held_job_asked_about_and_stopped_is_freed_and_a_late_go_runs_nothing() -> None:
    worker = worker_whose_calls_take(2.0)
    worker.ask(1)
    worker.ask(2, held=True)
    assert worker.step(StopAsked(2, POOL)) == [Free(POOL, 2, {})]
    assert kinds(worker.step(BeginAnswered(2, True))) == []


def test_a_held_job_its_pool_never_moves_is_never_asked_about() -> None:
    worker = worker_whose_calls_take(60.0)
    worker.ask(1)
    assert of(Run, worker.ask(2, held=True, move_after_s=0.0))


def test_the_call_is_held_against_the_wait_its_pool_stamped_on_the_held_job() -> None:
    """The pool moves a held job from behind a call of four times its mean call at least: 8 s after 2 s calls."""
    worker = worker_whose_calls_take(2.0)
    worker.ask(1)
    assert of(Run, worker.ask(2, held=True, move_after_s=8.0))
    assert worker.ask(3, held=True, move_after_s=4.0) == [AskBegin(POOL, 3)]


def test_a_held_job_waits_for_the_whole_job_before_it_the_pools_count_of_it() -> None:
    """Begun while the job before it waits for the journal's go, it would run beside it, outside its pool's count."""
    worker = worker_whose_calls_take(0.1)
    assert kinds(worker.ask(1, journal_to="supervisor", idempotency_key="k1")) == ["Journal"]
    assert kinds(worker.ask(2, held=True)) == []
    assert kinds(worker.step(Journalled("k1", 1, True))) == ["Run", "Answer", "Free", "Run", "Answer", "Free"]


def test_a_held_job_begins_after_the_journal_refuses_the_step_before_it_answered_through_its_pool() -> None:
    """Regression: a home host's job (through_pool) refused by the journal was answered by a Return, after which
    nothing began the held job: it waited out its deadline and its worker was killed.  It begins at once."""
    worker = Worker()
    assert kinds(worker.ask(1, journal_to="supervisor", idempotency_key="k1", through_pool=True)) == ["Journal"]
    assert kinds(worker.ask(2, held=True, through_pool=True)) == []
    out = worker.step(Journalled("k1", 1, False, "already ran"))
    assert kinds(out) == ["Log", "Return", "Run", "Return"] and of(Run, out)[0].job == 2


def test_a_held_job_begins_after_a_worker_error_answered_the_job_before_it_through_its_pool() -> None:
    worker = Worker(run=lambda request: object() if request.task_id == "t1" else Result("r"))  # t1's: unreadable
    worker.ask(1, journal_to="supervisor", idempotency_key="k1", through_pool=True)
    worker.ask(2, held=True, through_pool=True)
    out = worker.step(Journalled("k1", 1, True))
    assert [log.event for log in of(Log, out)] == ["worker_error"]  # job 1 is answered as a worker error
    assert [(type(c).__name__, c.job) for c in out if isinstance(c, (Return, Run))] == [
        ("Run", 1), ("Return", 1), ("Run", 2), ("Return", 2)]


def test_a_member_worker_waiting_only_for_its_pools_go_is_orphaned_when_that_pool_is_gone() -> None:
    """Its pool died between the HeldStart and the HeldGo: waiting for an answer that never comes is idle."""
    worker = worker_whose_calls_take(2.0)
    worker.step(Pinged(POOL, 0.0))
    worker.ask(1)
    assert worker.ask(2, held=True) == [AskBegin(POOL, 2)]
    worker.ask(3, held=True)  # held behind the one asked about
    worker.clock.now += 3600.0
    assert of(Exit, worker.step(OrphanDue()))
