"""A worker's answer and its pool's word that the job is over (issue 30: two tasks wedged in the fault matrix).

A worker answers its requester itself and tells its pool the job is over (``Free``).  Thespian sends one
message at a time to a peer: an answer behind one not yet acknowledged waits inside the worker's process,
and a worker killed then loses it.  Were the pool told the job was over at once, nobody would ever answer
that task; told only once the answer has left the process, the pool still holds the job and fails it.
"""

from __future__ import annotations

from typing import Any

from pegasus.pool.commands import Dispatch, Fail
from pegasus.pool.inputs import Exited, Finished
from pegasus.worker.commands import Answer, Free
from pegasus.worker.inputs import AnswerLeft, Requested
from tests.support.pool_core import Pool, Spec
from tests.support.worker_core import POOL, Ask, Job, Worker, of


def test_the_pool_is_told_a_job_is_over_only_once_its_answer_has_left_the_process() -> None:
    worker = Worker(answers_leave=False)
    out = worker.ask(3)
    assert [type(c).__name__ for c in out] == ["Run", "Answer"]
    assert worker.step(AnswerLeft(3)) == [Free(POOL, 3, {})]
    assert worker.step(AnswerLeft(3)) == []  # said again (written whole, then acknowledged): told once
    assert worker.step(AnswerLeft(9)) == []  # not a job it answered


def test_a_job_handed_over_meanwhile_runs_once_the_answer_before_it_has_left() -> None:
    """Run at once, a prefetched stage would block the worker's loop, where the answer leaves: the pool would
    hear of the first job only after the second ran, past the first one's deadline."""
    worker = Worker(answers_leave=False)
    worker.ask(1)
    assert worker.ask(2) == []  # held
    out = worker.step(AnswerLeft(1))
    assert [type(c).__name__ for c in out] == ["Free", "Run", "Answer"] and out[0] == Free(POOL, 1, {})


class Wired:
    """A pool core and one worker core, their messages handed across at once; answers leave the worker's
    process only when the test says so (``leave``): what has not left when the worker dies is lost."""

    def __init__(self) -> None:
        self.pool = Pool(Spec(name="tool", size=1))
        self.worker = Worker(answers_leave=False)
        self.inside: dict[int, str] = {}  # job -> task: answers still in the worker's process
        self.answered: list[str] = []  # tasks whose answer reached them, from the worker or the pool

    def ask(self, task: str) -> None:
        self._carry(self.pool.ask(task))

    def leave(self, job: int) -> None:
        self.answered.append(self.inside.pop(job))
        self._to_pool(self.worker.step(AnswerLeft(job)))

    def kill_worker(self) -> None:
        self.inside.clear()
        self._carry(self.pool.step(Exited("w1")))

    def _carry(self, commands: list[Any]) -> None:
        self.answered += [fail.request.task_id for fail in of(Fail, commands)]  # type: ignore[arg-type]
        for dispatch in of(Dispatch, commands):  # type: ignore[arg-type]
            if dispatch.worker == "w1":
                work = Job(dispatch.job, Ask(dispatch.request.task_id), dispatch.requester)
                self._to_pool(self.worker.step(Requested(work, POOL)))

    def _to_pool(self, commands: list[Any]) -> None:
        for answer in of(Answer, commands):
            self.inside[answer.job] = answer.request.task_id
        for free in of(Free, commands):
            self._carry(self.pool.step(Finished(free.job, None, free.worker)))


def test_a_worker_killed_with_answers_inside_leaves_their_jobs_to_its_pool() -> None:
    """a's answer is sent and acknowledged; b's waits behind it, inside the worker; the worker is killed.
    The pool still holds b's job (the worker never said it was over) and fails it: b goes on.  Before, the
    pool had been told at once, handed c to the same worker, and its death lost both b and c for good."""
    wired = Wired()
    for task in ("a", "b", "c"):
        wired.ask(task)
    wired.leave(next(job for job, task in wired.inside.items() if task == "a"))
    wired.kill_worker()
    assert wired.answered == ["a", "b"]  # (before: ["a"], b and c answered by nobody, ever)
    assert [job.request.task_id for job in wired.pool.core.jobs.values()] == ["c"]  # the new worker's
