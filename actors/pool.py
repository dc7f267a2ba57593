"""Stage pools: a fixed number of worker actors, a bounded FIFO queue, deadlines.

The pool size is the concurrency limit: a request waits in the pool's queue
until a worker is idle, then goes to the first idle worker.  There is no
semaphore anywhere; the pool's mailbox serialises every decision.

Every request is answered exactly once: with the worker's result, or as failed
when the queue is full, the deadline passes (the worker is then killed and
replaced, since a blocking call cannot be interrupted from outside) or the
worker dies (ChildActorExited; it is replaced).  Unlike ``thespian.troupe``, a
job whose worker died is never re-run silently: the requester decides.
"""

from __future__ import annotations

import os
import signal
import socket
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, ChildActorExited, WakeupMessage

from actors.messages import (
    Deadline, PoolConfig, PoolStats, PoolStatsRequest, StageRequest, StageResult, Work, WorkDone,
    WorkerInit, WorkerReady,
)
from actors.worker import StageWorker
from pegasus import logs

HOST = socket.gethostname()


@dataclass
class _Slot:
    index: int
    address: Any
    pid: int | None = None
    host: str | None = None
    job: int | None = None


@dataclass
class _Job:
    request: StageRequest
    requester: Any
    slot: int


@dataclass
class _PoolState:
    config: PoolConfig
    slots: dict[int, _Slot] = field(default_factory=dict)
    idle: deque[int] = field(default_factory=deque)
    queue: deque[tuple[StageRequest, Any]] = field(default_factory=deque)
    jobs: dict[int, _Job] = field(default_factory=dict)
    next_job: int = 0
    replaced: int = 0


class StagePool(ActorTypeDispatcher):
    """One pool (``llm`` or ``tool``).  Configure it with a PoolConfig first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool: _PoolState | None = None
        self.log = logs.get("pool")

    # -- set-up --------------------------------------------------------------------
    def receiveMsg_PoolConfig(self, config: PoolConfig, sender: Any) -> None:
        if self.pool is not None:
            return
        logs.configure_from(config.settings)
        self.log = logs.get("pool", pool=config.name)
        self.log.info("pool_started", size=config.size, queue_limit=config.queue_limit, timeout_s=config.timeout_s)
        self.pool = _PoolState(config)
        for index in range(config.size):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        assert self.pool is not None
        address = self.createActor(StageWorker)
        self.pool.slots[index] = _Slot(index, address)
        self.send(address, WorkerInit(self.pool.config.name, index, self.pool.config.settings))
        self.pool.idle.append(index)

    # -- requests --------------------------------------------------------------------
    def receiveMsg_StageRequest(self, request: StageRequest, sender: Any) -> None:
        pool = self.pool
        if pool is None:
            self.send(sender, _failed(request, "pool not configured", "exception"))
            return
        if not pool.idle and len(pool.queue) >= pool.config.queue_limit:
            self.send(sender, _failed(request, f"{pool.config.name} pool queue is full "
                                      f"({pool.config.queue_limit} waiting)", "queue_full"))
            return
        pool.queue.append((request, sender))
        self._dispatch()

    def _dispatch(self) -> None:
        pool = self.pool
        assert pool is not None
        while pool.idle and pool.queue:
            index = pool.idle.popleft()
            if index not in pool.slots:
                continue
            request, requester = pool.queue.popleft()
            pool.next_job += 1
            job = pool.next_job
            pool.jobs[job] = _Job(request, requester, index)
            pool.slots[index].job = job
            self.send(pool.slots[index].address, Work(job, request))
            timeout = request.timeout_s or pool.config.timeout_s
            self.wakeupAfter(timedelta(seconds=timeout), payload=Deadline(job))

    def receiveMsg_WorkDone(self, done: WorkDone, sender: Any) -> None:
        pool = self.pool
        if pool is None:
            return
        job = pool.jobs.pop(done.job, None)
        if job is None:
            return  # answered already (deadline): the late result is dropped
        self.send(job.requester, done.result)
        slot = pool.slots.get(job.slot)
        if slot is not None and slot.job == done.job:
            slot.job = None
            pool.idle.append(slot.index)
        self._dispatch()

    def receiveMsg_WorkerReady(self, ready: WorkerReady, sender: Any) -> None:
        if self.pool is not None and (slot := self.pool.slots.get(ready.index)) is not None:
            if slot.address == sender:
                slot.pid, slot.host = ready.pid, ready.host

    # -- failures ----------------------------------------------------------------------
    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        deadline = wakeup.payload
        if self.pool is None or not isinstance(deadline, Deadline) or deadline.job not in self.pool.jobs:
            return  # stale: that job finished in time
        job = self.pool.jobs[deadline.job]
        timeout = job.request.timeout_s or self.pool.config.timeout_s
        self.log.warning("stage_deadline", task_id=job.request.task_id, stage=job.request.stage, timeout_s=timeout)
        self._replace(job.slot, f"{job.request.stage} overran its {timeout:g}s deadline", "timeout", kill=True)

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        if self.pool is None:
            return
        for slot in list(self.pool.slots.values()):
            if slot.address == exited.childAddress:
                self.log.warning("worker_exited", worker=slot.index, pid=slot.pid, job=slot.job)
                self._replace(slot.index, "stage worker died", "worker_died", kill=False)
                return

    def _replace(self, index: int, reason: str, kind: str, *, kill: bool) -> None:
        """Answer the slot's job as failed, end the worker, start a fresh one."""
        pool = self.pool
        assert pool is not None
        slot = pool.slots.pop(index)
        if slot.job is not None and (job := pool.jobs.pop(slot.job, None)) is not None:
            worker = {"pool": pool.config.name, "index": index, "pid": slot.pid, "host": slot.host}
            self.send(job.requester, _failed(job.request, reason, kind, worker))
        if kill:
            _kill(slot)
            self.send(slot.address, ActorExitRequest())
        pool.replaced += 1
        self._spawn(index)
        self._dispatch()

    # -- observation and shutdown ----------------------------------------------------------
    def receiveMsg_PoolStatsRequest(self, ask: PoolStatsRequest, sender: Any) -> None:
        pool = self.pool
        if pool is None:
            self.send(sender, PoolStats(ask.ask_id, "?", 0, 0, 0, 0))
            return
        workers = [{"index": s.index, "pid": s.pid, "host": s.host, "busy": s.job is not None}
                   for s in sorted(pool.slots.values(), key=lambda s: s.index)]
        busy = sum(1 for s in pool.slots.values() if s.job is not None)
        self.send(sender, PoolStats(ask.ask_id, pool.config.name, len(pool.slots), busy, len(pool.queue),
                                    pool.replaced, workers))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        # Tell every worker to exit, so shutdown never waits on a forgotten child.
        if self.pool is not None:
            for slot in self.pool.slots.values():
                self.send(slot.address, ActorExitRequest())


def _failed(request: StageRequest, error: str, kind: str, worker: dict[str, Any] | None = None) -> StageResult:
    return StageResult(task_id=request.task_id, token=request.token, stage=request.stage, ok=False,
                       error=error, error_kind=kind, worker=worker or {})  # type: ignore[arg-type]


def _kill(slot: _Slot) -> None:
    """SIGKILL a worker stuck in a blocking call: only one on this host whose pid we know."""
    if slot.pid is None or slot.host != HOST or slot.pid == os.getpid():
        return
    try:
        os.kill(slot.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
