"""Stage pools: worker actors placed on the leader and on convention members, a bounded FIFO queue, deadlines.

The number of workers is the concurrency limit: a request waits in the pool's
queue until a worker is idle, then goes to the first idle worker.  There is no
semaphore anywhere; the pool's mailbox serialises every decision.

Placement.  A pool runs its ``[pools]`` workers on its own admin (a single
system, or the leader of a convention unless ``[convention] local_workers`` is
false).  On a leader (``[convention] lead``) it also asks Thespian for
``ActorSystemConventionUpdate`` messages (``notifyOnSystemRegistrationChanges``;
the leader's admin sends one per current member at once, then one per join and
per leave: thespian/system/admin/convention.py ``add_notification_handler``,
``got_convention_register``, ``_remote_system_cleanup``).  A member that
advertises ``pegasus.<pool>_workers = N`` gets N workers, each created with a
requirement naming that member (``worker.placement``) so Thespian's capability
check (``StageWorker.actorSystemCapabilityCheck``) forwards the creation to it.
A member that leaves or is declared dead takes its workers with it: their
in-flight requests are answered as failed, exactly like a worker crash, and the
pool shrinks; it grows again when a member (re)joins.

Every request is answered: by its worker, which sends the result straight to
the requester (``Work.reply_to``; the pool gets only a short ``WorkDone``, so a
hop costs three sends, not four), or by the pool as failed when the queue is
full, the deadline passes (the worker is then ended and replaced, since a
blocking call cannot be interrupted from outside), the worker dies
(ChildActorExited; it is replaced), its member leaves, or it waited a whole
stage timeout while the pool had no worker at all.  A worker the pool gave up
on may still answer late; requesters keep the first answer for a request's
token and drop the rest.  Unlike ``thespian.troupe``, a job whose worker died
is never re-run silently: the requester decides.  The one result that goes
through the pool is a rate-limited model call (llm pool): the pool decides
whether it waits and runs again.

Prefetch (``PoolConfig.prefetch``, the llm pool's ``[pools] llm_prefetch``,
default 1).  While every worker is busy and requests wait, the pool hands up to
``prefetch`` more requests to each worker in advance: they wait in the worker's
mailbox and it starts the next one the moment it has answered the last, with no
round trip through the pool in between.  (What a worker still idles between two
stages, ~3-5 ms here, is its own turnaround: sending the result and the WorkDone,
and Thespian delivering the next message.)  Concurrency is unchanged: a
worker runs one stage at a time.  A prefetched request's deadline starts when
its worker is done with the one before (its ``WorkDone``), i.e. when it starts.
When a worker dies or is ended, the requests still waiting in its mailbox never
ran: they go back to the front of the queue, not answered as failed.  Only the
llm pool prefetches: a model stage has no side effect, so even the rare request
that had just started when its worker died may safely run again (its requester
keeps the first answer).  A tool step is never handed out early, and neither is
a request of a pool with a rate budget (a 429 must pause every request not yet
started).  The worker receiving the next request is the one whose current
stage started first (the likeliest to finish first).

Hung workers.  A local worker whose process is stopped (SIGSTOP, a debugger:
state T or t in /proc) is not dead, so Thespian says nothing, and its held
requests would wait for its whole stage timeout while other workers idle.
While any local worker is busy the pool looks every ``HEALTH_PERIOD_S``; one
seen stopped on two looks in a row (so 0.5-1 s) is ended and replaced like a
worker past its deadline.  Its held requests go back to the front of the
queue; so does its running llm stage (no side effect: it may run again); its
running tool step is answered as a lost worker's, and the task actor lets the
journal decide (an effectful step that had started is reported interrupted,
never repeated).  A remote worker's process cannot be seen from here: its held
requests come back when its running stage passes its deadline.
"""

from __future__ import annotations

import heapq
import os
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import (
    ActorExitRequest, ActorSystemConventionUpdate, ActorTypeDispatcher, ChildActorExited, WakeupMessage,
)

from actors import procs, titles
from actors.messages import (
    BudgetWakeup, CancelTask, DeadlineCheck, HealthCheck, PlacementDeadline, PoolConfig, PoolStats, PoolStatsRequest,
    QueueDeadline, StageRequest, StageResult, Work, WorkDone, WorkerInit, WorkerReady,
)
from actors.system import HOME_CAPABILITY, MEMBER_CAPABILITY, member_name
from actors.worker import StageWorker, advertised_workers, placement
from pegasus import logs
from pegasus.llm.budget import LlmBudget

MAX_WORKERS_PER_MEMBER = 256  # a typo in a member's capability must not fork thousands of processes
HEALTH_PERIOD_S = 0.5  # how often busy local workers are checked for being stopped (hung)
STOPPED_STATES = frozenset({"T", "t"})  # /proc state of a stopped or traced process


@dataclass
class _Slot:
    index: int
    address: Any
    member: str  # the convention member (admin) it runs on; the pool's own for local workers
    local: bool  # created by this pool's process on its own admin (only these may be SIGKILLed)
    serial: int
    ready: bool = False
    pid: int | None = None
    host: str | None = None
    jobs: deque[int] = field(default_factory=deque)  # handed to it, in order; the first one runs
    since: float = 0.0  # time.monotonic() when the running job started
    stopped_looks: int = 0  # health checks in a row that found its process stopped


@dataclass
class _Member:
    name: str
    address: Any  # the member admin's address; None for the pool's own admin
    capabilities: dict[str, Any]
    wanted: int
    joined: float = field(default_factory=time.time)
    failed_placements: int = 0


@dataclass
class _Job:
    request: StageRequest
    requester: Any
    slot: int
    requeues: int = 0
    seq: int = 0  # its place in the queue it came from (kept when it goes back there)
    canceled: bool = False  # its task was canceled while it waited in the worker's mailbox: never requeued


@dataclass
class _Waiting:
    seq: int
    request: StageRequest
    requester: Any
    watched: bool = False  # a QueueDeadline is pending for it
    requeues: int = 0  # times it came back rate-limited (llm pool)


@dataclass
class _PoolState:
    config: PoolConfig
    me: str
    lead: bool
    placement_timeout_s: float
    slots: dict[int, _Slot] = field(default_factory=dict)
    idle: deque[int] = field(default_factory=deque)
    queue: deque[_Waiting] = field(default_factory=deque)
    jobs: dict[int, _Job] = field(default_factory=dict)
    members: dict[str, _Member] = field(default_factory=dict)
    deadlines: list[tuple[float, int]] = field(default_factory=list)  # heap of (time.monotonic() due, job)
    armed: float | None = None  # when the pending DeadlineCheck fires
    next_job: int = 0
    next_seq: int = 0
    next_serial: int = 0
    next_index: int = 0
    replaced: int = 0


class StagePool(ActorTypeDispatcher):
    """One pool (``llm`` or ``tool``).  Configure it with a PoolConfig first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.pool: _PoolState | None = None
        self.closing = False  # told to exit: replace nothing any more
        self.budget: LlmBudget | None = None  # rate budgets of the llm pool (a model provider)
        self.budget_wakeup = False  # a BudgetWakeup is pending
        self.prefetch = 0  # requests a busy worker may hold (none under a rate budget)
        self.health_armed = False  # a HealthCheck wakeup is pending
        self.log = logs.get("pool")

    # -- set-up --------------------------------------------------------------------
    def receiveMsg_PoolConfig(self, config: PoolConfig, sender: Any) -> None:
        if self.pool is not None:
            return
        logs.configure_from(config.settings)
        self.log = logs.get("pool", pool=config.name)
        titles.set_title(f"{config.name} pool")
        system, convention = config.settings.system, config.settings.convention
        lead = convention.lead
        local = config.size if (not lead or convention.local_workers) else 0
        me = member_name(system.advertise, system.bind, system.admin_port)
        self.pool = _PoolState(config, me, lead, convention.placement_timeout_s)
        self.pool.members[me] = _Member(me, None, {}, local)
        self.budget = LlmBudget.for_pool(config.name, config.settings)
        self.prefetch = config.prefetch if self.budget is None else 0
        self.log.info("pool_started", size=local, queue_limit=config.queue_limit, timeout_s=config.timeout_s, lead=lead)
        for _ in range(local):
            self._spawn(self._new_index(), me)
        if lead:
            self.notifyOnSystemRegistrationChanges(True)

    def _new_index(self) -> int:
        assert self.pool is not None
        self.pool.next_index += 1
        return self.pool.next_index - 1

    def _spawn(self, index: int, member: str) -> None:
        pool = self.pool
        assert pool is not None
        local = member == pool.me
        settings = pool.config.settings
        if local:
            address = self.createActor(StageWorker)
        else:
            address = self.createActor(StageWorker, targetActorRequirements=placement(member, pool.config.name))
            # A remote worker logs under its member's state directory, not the leader's path.
            home = str(pool.members[member].capabilities.get(HOME_CAPABILITY, ""))
            settings = settings.model_copy(update={"state": settings.state.model_copy(update={"home": home})})
        pool.next_serial += 1
        slot = _Slot(index, address, member, local, pool.next_serial, ready=local)
        pool.slots[index] = slot
        self.send(address, WorkerInit(pool.config.name, index, settings))
        if local:
            pool.idle.append(index)
        else:  # usable once it reports; if it never does (creation failed), drop it
            self.wakeupAfter(timedelta(seconds=pool.placement_timeout_s), payload=PlacementDeadline(index, slot.serial))

    # -- membership ------------------------------------------------------------------
    def receiveMsg_ActorSystemConventionUpdate(self, update: ActorSystemConventionUpdate, sender: Any) -> None:
        pool = self.pool
        if pool is None or not pool.lead:
            return
        caps = dict(update.remoteCapabilities or {})
        name = caps.get(MEMBER_CAPABILITY)
        if not isinstance(name, str) or name == pool.me:
            self.log.warning("member_ignored", address=str(update.remoteAdminAddress), reason="no pegasus.member")
            return
        known = pool.members.get(name)
        if update.remoteAdded:
            if known is not None and known.address == update.remoteAdminAddress:
                known.capabilities = caps
                return
            if known is not None:
                self._member_left(name, "was replaced by a new admin of the same name")
            self._member_joined(name, update.remoteAdminAddress, caps)
        elif known is not None:
            self._member_left(name, "left the convention")

    def _member_joined(self, name: str, address: Any, caps: dict[str, Any]) -> None:
        pool = self.pool
        assert pool is not None
        wanted = min(advertised_workers(caps, pool.config.name), MAX_WORKERS_PER_MEMBER)
        pool.members[name] = _Member(name, address, caps, wanted)
        self.log.info("member_joined", member=name, workers=wanted)
        for _ in range(wanted):
            self._spawn(self._new_index(), name)

    def _member_left(self, name: str, why: str) -> None:
        pool = self.pool
        assert pool is not None
        pool.members.pop(name, None)
        lost = [slot for slot in pool.slots.values() if slot.member == name]
        self.log.warning("member_left", member=name, workers=len(lost), why=why)
        for slot in lost:
            self._drop(slot.index, f"convention member {name} {why}", "worker_died")
            # A member declared dead may only have been slow: its old workers must not
            # linger there unseen.  (A dead one refuses the connection; nothing waits.)
            self.send(slot.address, ActorExitRequest())
        self._watch_starved()
        self._dispatch()

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
        pool.next_seq += 1
        pool.queue.append(_Waiting(pool.next_seq, request, sender))
        self._watch_starved()
        self._dispatch()

    def _dispatch(self) -> None:
        pool = self.pool
        assert pool is not None
        while pool.queue and (slot := self._next_slot()) is not None:
            if self.budget is not None:  # (such a pool never prefetches: the slot was idle)
                wait = self.budget.admit(pool.queue[0].request.context, pool.next_job + 1)
                if wait > 0:  # over the model's budget (or paused by a 429): the request stays first
                    pool.idle.appendleft(slot.index)
                    if not self.budget_wakeup:
                        self.budget_wakeup = True
                        self.wakeupAfter(timedelta(seconds=wait), payload=BudgetWakeup())
                    return
            waiting = pool.queue.popleft()
            pool.next_job += 1
            job = pool.next_job
            pool.jobs[job] = _Job(waiting.request, waiting.requester, slot.index, waiting.requeues, waiting.seq)
            slot.jobs.append(job)
            self.send(slot.address, Work(job, waiting.request, waiting.requester))
            if len(slot.jobs) == 1:
                self._started(slot)

    def _next_slot(self) -> _Slot | None:
        """The first idle worker; failing that (prefetch), the busy one with room whose stage started first."""
        pool = self.pool
        assert pool is not None
        while pool.idle:
            slot = pool.slots.get(pool.idle.popleft())
            if slot is not None and slot.ready and not slot.jobs:
                return slot
        if not self.prefetch:
            return None
        room = [s for s in pool.slots.values() if s.ready and 0 < len(s.jobs) <= self.prefetch]
        return min(room, key=lambda s: (len(s.jobs), s.since), default=None)

    def _started(self, slot: _Slot) -> None:
        """The slot's first job runs from now: its deadline starts."""
        pool = self.pool
        assert pool is not None
        job_id = slot.jobs[0]
        slot.since = time.monotonic()
        heapq.heappush(pool.deadlines, (slot.since + self._timeout(pool.jobs[job_id].request), job_id))
        self._arm()
        if slot.local and not self.health_armed:
            self.health_armed = True
            self.wakeupAfter(timedelta(seconds=HEALTH_PERIOD_S), payload=HealthCheck())

    def _arm(self) -> None:
        """Keep one DeadlineCheck pending, for the earliest deadline of a job still running."""
        pool = self.pool
        assert pool is not None
        while pool.deadlines and pool.deadlines[0][1] not in pool.jobs:
            heapq.heappop(pool.deadlines)  # answered in time: forget it
        if pool.deadlines and (pool.armed is None or pool.deadlines[0][0] < pool.armed):
            pool.armed = pool.deadlines[0][0]
            self.wakeupAfter(timedelta(seconds=max(0.0, pool.armed - time.monotonic())), payload=DeadlineCheck())

    def _timeout(self, request: StageRequest) -> float:
        assert self.pool is not None
        return request.timeout_s or self.pool.config.timeout_s

    def _watch_starved(self) -> None:
        """With no worker at all (none local, no member offering any), queued requests wait one timeout at most."""
        pool = self.pool
        assert pool is not None
        if pool.slots:
            return
        for waiting in pool.queue:
            if not waiting.watched:
                waiting.watched = True
                self.wakeupAfter(timedelta(seconds=self._timeout(waiting.request)), payload=QueueDeadline(waiting.seq))

    def receiveMsg_WorkDone(self, done: WorkDone, sender: Any) -> None:
        pool = self.pool
        if pool is None:
            return
        job = pool.jobs.pop(done.job, None)
        if job is None:
            # Answered already (deadline, member lost).  A late result the worker sent straight
            # to the requester carries that request's token, which the requester has moved past.
            return
        worker = done.result.worker if done.result is not None else done.worker
        requeue = self.budget is not None and self.budget.settle(done.job, worker, job.requeues)
        if requeue:
            # Rate-limited by the endpoint: admission pauses, the request waits first in line.
            self.log.warning("rate_limited", task_id=job.request.task_id, stage=job.request.stage,
                             retry_after_s=worker.get("retry_after_s"), requeues=job.requeues + 1)
            pool.next_seq += 1
            pool.queue.appendleft(_Waiting(pool.next_seq, job.request, job.requester, requeues=job.requeues + 1))
        elif done.result is not None:  # (None: the worker answered the requester itself)
            self.send(job.requester, done.result)
        slot = pool.slots.get(job.slot)
        if slot is not None and done.job in slot.jobs:
            first = slot.jobs[0] == done.job
            slot.jobs.remove(done.job)
            if not slot.jobs:
                pool.idle.append(slot.index)
            elif first:
                self._started(slot)  # the worker has already begun the request it held
        self._dispatch()

    def receiveMsg_WorkerReady(self, ready: WorkerReady, sender: Any) -> None:
        pool = self.pool
        if pool is None or (slot := pool.slots.get(ready.index)) is None or slot.address != sender:
            return
        slot.pid, slot.host = ready.pid, ready.host
        if not slot.ready:
            slot.ready = True
            pool.idle.append(slot.index)
            self.log.info("worker_placed", worker=slot.index, member=slot.member, pid=ready.pid)
            self._dispatch()

    # -- failures ----------------------------------------------------------------------
    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        pool, payload = self.pool, wakeup.payload
        if pool is None:
            return
        if isinstance(payload, DeadlineCheck):
            pool.armed = None
            while pool.deadlines and pool.deadlines[0][0] <= time.monotonic():
                _, job_id = heapq.heappop(pool.deadlines)
                if (job := pool.jobs.get(job_id)) is not None:
                    timeout = self._timeout(job.request)
                    self.log.warning("stage_deadline", task_id=job.request.task_id, stage=job.request.stage,
                                     timeout_s=timeout)
                    self._replace(job.slot, f"{job.request.stage} overran its {timeout:g}s deadline", "timeout",
                                  kill=True)
            self._arm()
        elif isinstance(payload, PlacementDeadline):
            slot = pool.slots.get(payload.index)
            if slot is not None and slot.serial == payload.serial and not slot.ready:
                self.log.warning("placement_failed", worker=slot.index, member=slot.member,
                                 timeout_s=pool.placement_timeout_s)
                if (member := pool.members.get(slot.member)) is not None:
                    member.failed_placements += 1
                self.send(slot.address, ActorExitRequest())
                self._drop(slot.index, "its worker was never placed", "worker_died")
                self._watch_starved()
        elif isinstance(payload, QueueDeadline):
            self._starved(payload.seq)
        elif isinstance(payload, BudgetWakeup):
            self.budget_wakeup = False
            self._dispatch()
        elif isinstance(payload, HealthCheck):
            self.health_armed = False
            self._check_health()
        # anything else is stale: that job finished in time, that worker reported

    def _check_health(self) -> None:
        """End the busy local workers found stopped twice in a row (see the module docstring)."""
        pool = self.pool
        assert pool is not None
        for slot in [s for s in pool.slots.values() if s.local and s.jobs and s.pid is not None]:
            stat = procs.read_stat(slot.pid)  # type: ignore[arg-type]
            slot.stopped_looks = slot.stopped_looks + 1 if stat is not None and stat.state in STOPPED_STATES else 0
            if slot.stopped_looks >= 2:
                self.log.warning("worker_hung", worker=slot.index, pid=slot.pid, jobs=list(slot.jobs))
                self._replace(slot.index, f"stage worker {slot.pid} was stopped (hung)", "worker_died", kill=True,
                              rerun=pool.config.name == "llm")
        if not self.closing and any(s.local and s.jobs for s in pool.slots.values()):
            self.health_armed = True
            self.wakeupAfter(timedelta(seconds=HEALTH_PERIOD_S), payload=HealthCheck())

    def _starved(self, seq: int) -> None:
        pool = self.pool
        assert pool is not None
        waiting = next((w for w in pool.queue if w.seq == seq), None)
        if waiting is None:
            return
        waiting.watched = False
        if pool.slots:
            return  # workers came (or are being placed): it waits its turn like any other request
        pool.queue.remove(waiting)
        timeout = self._timeout(waiting.request)
        self.send(waiting.requester, _failed(waiting.request, f"no {pool.config.name} worker in the convention "
                                             f"for {timeout:g}s", "timeout"))
        self._watch_starved()

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        # For a worker on a member, the member's admin (its surrogate parent) forwards this.
        if self.pool is None:
            return
        for slot in list(self.pool.slots.values()):
            if slot.address == exited.childAddress:
                self.log.warning("worker_exited", worker=slot.index, member=slot.member, pid=slot.pid,
                                 jobs=list(slot.jobs))
                where = "" if slot.local else f" on convention member {slot.member}"
                self._replace(slot.index, f"stage worker died{where}", "worker_died", kill=False)
                return

    def _drop(self, index: int, reason: str, kind: str, *, rerun: bool = False) -> _Slot | None:
        """Remove a slot; answer its running job (if any) as failed, and queue again, first
        in line, the jobs it held but never started (prefetch).  ``rerun``: its running job
        (an llm stage, which has no side effect) goes back to the queue too.  Returns the slot."""
        pool = self.pool
        assert pool is not None
        slot = pool.slots.pop(index, None)
        if slot is None:
            return None
        if index in pool.idle:
            pool.idle.remove(index)
        if not slot.jobs:
            return slot
        running, *held = slot.jobs
        if rerun and self.budget is not None and running in pool.jobs:
            self.budget.release(running)  # admitted again when it runs again
        for job_id in reversed([running, *held] if rerun else held):
            if (job := pool.jobs.pop(job_id, None)) is not None and not job.canceled:
                pool.queue.appendleft(_Waiting(job.seq, job.request, job.requester, requeues=job.requeues))
        if (job := pool.jobs.pop(running, None)) is not None:
            if self.budget is not None:
                self.budget.release(running)
            worker = {"pool": pool.config.name, "index": index, "pid": slot.pid, "host": slot.host,
                      "member": slot.member}
            self.send(job.requester, _failed(job.request, reason, kind, worker))
        return slot

    def _replace(self, index: int, reason: str, kind: str, *, kill: bool, rerun: bool = False) -> None:
        """Answer the slot's job as failed (``rerun``: queue it again), end the worker, start a
        fresh one on the same member."""
        pool = self.pool
        assert pool is not None
        slot = self._drop(index, reason, kind, rerun=rerun)
        if slot is None:
            return
        if kill:
            _kill(slot)
        if kill or not slot.local:
            # A remote worker stuck in a blocking call cannot be killed from here: it exits
            # when the call returns and it reads this.  A remote worker reported dead may be
            # alive: when a member leaves, the leader's admin cancels its open transmits to that
            # host and fails the creations it forwarded there, which reaches us as
            # ChildActorExited of workers that still run (on one host: of every member).
            self.send(slot.address, ActorExitRequest())
        pool.replaced += 1
        if slot.member in pool.members and not self.closing:
            self._spawn(index, slot.member)
        self._watch_starved()
        self._dispatch()

    def receiveMsg_CancelTask(self, cancel: CancelTask, sender: Any) -> None:
        """A canceled task's work: queued requests are dropped, a running stage's worker is
        ended and replaced (a blocking call cannot be interrupted otherwise), a prefetched one
        still runs (see below); nobody waits for those answers any more."""
        pool = self.pool
        if pool is None:
            return
        pool.queue = deque(w for w in pool.queue if w.request.task_id != cancel.task_id)
        for job_id, job in list(pool.jobs.items()):
            if job.request.task_id != cancel.task_id or job_id not in pool.jobs:
                continue
            if pool.slots[job.slot].jobs[0] != job_id:
                # Held in the worker's mailbox, behind another task's stage: it runs and its
                # answer is dropped.  Ending the worker when it gets there could lose the
                # result it has just sent for that other task (a SIGKILL does not wait for
                # Thespian's transmits), so it is left alone; never queued again.
                job.canceled = True
            else:
                self.log.info("stage_canceled", task_id=cancel.task_id, stage=job.request.stage, worker=job.slot)
                self._replace(job.slot, "the task was canceled", "exception", kill=True)

    # -- observation and shutdown ----------------------------------------------------------
    def receiveMsg_PoolStatsRequest(self, ask: PoolStatsRequest, sender: Any) -> None:
        pool = self.pool
        if pool is None:
            self.send(sender, PoolStats(ask.ask_id, "?", 0, 0, 0, 0))
            return
        slots = sorted(pool.slots.values(), key=lambda s: s.index)
        workers = [{"index": s.index, "pid": s.pid, "host": s.host, "busy": bool(s.jobs), "member": s.member,
                    "ready": s.ready, "held": max(0, len(s.jobs) - 1),
                    "tasks": [pool.jobs[j].request.task_id for j in s.jobs if j in pool.jobs]} for s in slots]
        members = [{"name": m.name, "address": None if m.address is None else str(m.address),
                    "local": m.address is None, "wanted": m.wanted,
                    "workers": sum(1 for s in slots if s.member == m.name),
                    "capabilities": {k: v for k, v in m.capabilities.items() if k.startswith("pegasus.")},
                    "failed_placements": m.failed_placements, "joined": m.joined}
                   for m in sorted(pool.members.values(), key=lambda m: (m.address is not None, m.name))]
        busy = sum(1 for s in slots if s.jobs)
        self.send(sender, PoolStats(ask.ask_id, pool.config.name, len(slots), busy, len(pool.queue),
                                     pool.replaced, workers, members))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        # Tell every worker to exit (remote ones too: their member does not know they are
        # orphans), so shutdown never waits on a forgotten child.
        self.closing = True
        if self.pool is not None:
            if self.pool.lead:
                self.notifyOnSystemRegistrationChanges(False)
            for slot in self.pool.slots.values():
                if slot.jobs and _kill(slot):
                    # Busy in a blocking call, it would read its ActorExitRequest only when the call
                    # returns (a 30 s tool step held stop for ~12 s): ended now, like a crash.  Its
                    # step's journal row says what is known (an effectful one: effects_unknown).
                    # Thespian 4.0.1 may then never count it gone (its exit loop's onError lambda
                    # names the last child, not the refused one; and a sibling's exit can drop
                    # the dead process unannounced), and waits for it until the admin gives up
                    # (10 s): tell ourselves, which removes it from the children we wait for.
                    self.send(self.myAddress, ChildActorExited(slot.address))
                    continue
                self.send(slot.address, ActorExitRequest())


def _failed(request: StageRequest, error: str, kind: str, worker: dict[str, Any] | None = None) -> StageResult:
    return StageResult(task_id=request.task_id, token=request.token, stage=request.stage, ok=False,
                       error=error, error_kind=kind, worker=worker or {})  # type: ignore[arg-type]


def _kill(slot: _Slot) -> bool:
    """SIGKILL a worker stuck in a blocking call -- only one this very process forked.

    Several admins may run on one host (a leader and members), so a pid and a
    host name are not enough: a remote worker's pid may be any process here.
    Only a worker created locally by this pool is a child of this process;
    /proc must confirm that parent link before the signal is sent.
    """
    if not slot.local or slot.pid is None or slot.pid == os.getpid():
        return False
    stat = procs.read_stat(slot.pid)
    if stat is None or stat.ppid != os.getpid() or stat.is_zombie:
        return False
    try:
        os.kill(slot.pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True

