"""A stage pool's decisions: queue, prefetch, deadlines, membership, rate budget, hung workers, cancel.

``PoolCore.step(input) -> [command]`` is the whole interface: the carrier (actors/pool.py) turns
each message into an input and carries out the commands in order.  It never raises: an error
becomes a Log command (and, for a request, its failed answer).  No Thespian, no I/O; the clocks are
parameters.  Every request is answered, by its worker or by the pool as failed, and a job whose
worker died is never run again silently.  The rules: docs/architecture.md, "The pool".
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from typing import Any

from pegasus.levels import Level
from pegasus.llm.budget import LlmBudget
from pegasus.llm.capabilities import ladder_view, merged
from pegasus.llm.listen import streams
from pegasus.pool.commands import (
    AnswerHeld, Arm, EndWorker, Fail, Forward, Inspect, Log, SendStats, SetUp, Stop, Watch,
)
from pegasus.pool.endpoints import EndpointLimits
from pegasus.pool.inputs import (
    BudgetDue, Canceled, Closing, Configured, Created, DeadlineDue, Exited, Finished, HealthDue, HeldAsked, Looked,
    MemberChanged, MoveDue, PingDue, PlacementDue, PoolInput, Pong, Reported, Requested, RespawnDue, StarveDue,
    StatsAsked,
)
from pegasus.pool.pings import Pinging
from pegasus.pool.placement import MAX_WORKERS_PER_MEMBER, advertised_workers
from pegasus.pool.order import Waiting
from pegasus.pool.state import MOVE_MEAN_FACTOR, Job, JobNumbers, Member, Out, member_name_of
from pegasus.supervision import Alarm, ChildSpec, Exceeded, Restart, StartAgain, Started, Supervision
from pegasus.supervision import Exited as Died
from pegasus.task.names import PoolName

STOPPED_STATES = frozenset({"T", "t"})  # /proc state of a stopped or traced process
EARLY_LIMIT = 10000  # requests a pool holds before its configuration arrives
RERUN_POOL = PoolName.LLM  # its stages have no side effect: one whose worker hung may run again
MEMBER_RERUNS = 2  # an llm stage whose member's worker died runs again at most this often
STOP_GRACE_S = 5.0  # a worker told to stop a streamed stage has this long before it is ended
# A worker slot whose worker dies by itself: replaced at once, then with a doubling pause while it keeps dying
# (one that dies at start must not fork in a tight loop).  Never given up on: the pool keeps its size.
WORKER_SPEC = ChildSpec(Restart.PERMANENT, intensity=10, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN,
                        first_s=0.0, then_s=0.5, max_s=10.0, stable_s=30.0)


class PoolCore(Pinging):
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, job_numbers: JobNumbers | None = None) -> None:
        super().__init__(clock, wall_clock, job_numbers)
        self.worker_deaths = Supervision({"worker": WORKER_SPEC})  # per slot: the pause before its next worker
        self._handlers: dict[type, Callable[[Any, Out], None]] = {
            Configured: self._configure, Requested: self._hold, Canceled: self._cancel_held, StatsAsked: self._stats}
        # Requests that came before the pool's configuration: a restored task's first request can reach a
        # pool before its PoolConfig does (two senders, no order between them).  Run once it is configured.
        self._early: list[Requested] = []

    def step(self, event: PoolInput) -> Out:
        """Apply one input; the commands to carry out, in order.  Never raises."""
        out: Out = []
        handler = self._handlers.get(type(event))
        if handler is None:
            return out  # nothing to do in this state (e.g. a stale timer before configuration)
        try:
            handler(event, out)
        except Exception as exc:  # noqa: BLE001 - a bug here must not become Thespian's PoisonMessage
            error = f"{type(exc).__name__}: {exc}"
            out.append(Log(Level.ERROR, "pool_error", {"input": type(event).__name__, "error": error}))
            if isinstance(event, Requested):
                out.append(Fail(event.requester, event.request, f"pool error: {error}", "exception"))
        return out

    # -- set-up ------------------------------------------------------------------------------
    def _configure(self, event: Configured, out: Out) -> None:
        config = self.config = event.config
        convention = config.settings.convention
        self.name, self.me, self.lead = config.name, event.me, convention.lead
        self.placement_timeout_s = convention.placement_timeout_s
        local = config.size if (not self.lead or convention.local_workers) else 0
        self.members[self.me] = Member(self.me, None, {}, local, self.wall_clock())
        self.budget = LlmBudget.for_pool(config.name, config.settings, self.clock)
        self.endpoints = EndpointLimits(config.settings.llm) if self.budget is not None else None
        self.prefetch = config.prefetch if self.budget is None else 0
        self.move_after_s = config.settings.pools.held_move_after_s if self.prefetch else 0.0
        self.call_mean_s = self.move_after_s / MOVE_MEAN_FACTOR  # (a first long call must not set the bar alone)
        # Streamed llm stages run beside the worker's loop: it can stop one (closing the stream) and stay.
        self.stoppable = config.name == PoolName.LLM and streams(config.settings)
        self._handlers = {
            Requested: self._requested, Finished: self._finished, Created: self._created, Reported: self._reported,
            Exited: self._exited, MemberChanged: self._member_changed, Canceled: self._canceled,
            StatsAsked: self._stats, Closing: self._closing, Looked: self._looked, DeadlineDue: self._deadline_due,
            StarveDue: self._starve_due, BudgetDue: self._budget_due, HealthDue: self._health_due,
            PlacementDue: self._placement_due, PingDue: self._ping_due, Pong: self._pong, RespawnDue: self._respawn_due,
            HeldAsked: self._held_asked, MoveDue: self._move_due,
        }
        out.append(SetUp(config.settings, config.name))
        out.append(Log(Level.INFO, "pool_started", {"size": local, "queue_limit": config.queue_limit,
                                                "timeout_s": config.timeout_s, "lead": self.lead}))
        for _ in range(local):
            self._spawn(self._new_index(), self.me, out)
        if self.lead:
            out.append(Watch(True))
            self._arm_ping(out)
        early, self._early = self._early, []
        for request in early:
            self._requested(request, out)

    def _created(self, event: Created, out: Out) -> None:
        slot = self.slots.get(event.index)
        if slot is None or slot.address is not None:
            out.append(EndWorker(event.address))  # not asked for (cannot happen): do not leave it running
            return
        slot.address = event.address
        if slot.local:  # usable at once
            slot.ready = True
            self.idle.append(slot.index)
            self._dispatch(out)
        else:  # usable once it reports; if it never does (creation failed), dropped
            out.append(Arm(self.placement_timeout_s, PlacementDue(slot.index, slot.serial)))

    def _reported(self, event: Reported, out: Out) -> None:
        slot = self.slots.get(event.index)
        if slot is None or slot.address != event.address:
            return
        slot.pid, slot.host = event.pid, event.host
        self.worker_deaths.step(Started(str(slot.index), "worker", self.clock()))
        self._heard_from(slot)
        if not slot.ready:
            slot.ready = True
            self.idle.append(slot.index)
            out.append(Log(Level.INFO, "worker_placed", {"worker": slot.index, "member": slot.member, "pid": event.pid}))
            self._ping_new(slot, out)  # before any stage: a worker busy at every PingDue still learns it has a pool
            self._dispatch(out)

    # -- membership --------------------------------------------------------------------------
    def _member_changed(self, event: MemberChanged, out: Out) -> None:
        if not self.lead:
            return
        caps = dict(event.capabilities or {})
        name = member_name_of(caps)
        if name is None or name == self.me:
            out.append(Log(Level.WARNING, "member_ignored", {"address": str(event.address), "reason": "no pegasus.member"}))
            return
        known = self.members.get(name)
        if not event.added:
            if known is not None:
                self._member_left(name, "left the convention", out)
            return
        if known is not None and known.address == event.address:
            known.capabilities = caps
            return
        if known is not None:
            self._member_left(name, "was replaced by a new admin of the same name", out)
        wanted = min(advertised_workers(caps, self.name), MAX_WORKERS_PER_MEMBER)
        self.members[name] = Member(name, event.address, caps, wanted, self.wall_clock())
        out.append(Log(Level.INFO, "member_joined", {"member": name, "workers": wanted}))
        for _ in range(wanted):
            self._spawn(self._new_index(), name, out)

    def _member_left(self, name: str, why: str, out: Out) -> None:
        self.members.pop(name, None)
        lost = [slot for slot in self.slots.values() if slot.member == name]
        out.append(Log(Level.WARNING, "member_left", {"member": name, "workers": len(lost), "why": why}))
        for slot in lost:
            # Its llm stages run again elsewhere (no side effect, and the member's loss is no fault of
            # theirs); a tool step fails as a crashed worker's and the task's journal decides.  A late
            # answer from the lost worker (a partition that heals) carries the same token: whichever comes
            # second is dropped by the task.
            self._drop(slot.index, f"convention member {name} {why}", "worker_died", out,
                       rerun=self.name == RERUN_POOL)
            # A member declared dead may only have been slow: its old workers must not
            # linger there unseen.  (A dead one refuses the connection; nothing waits.)
            out.append(EndWorker(slot.address))
        self._watch_starved(out)
        self._dispatch(out)

    def _placement_due(self, event: PlacementDue, out: Out) -> None:
        slot = self.slots.get(event.index)
        if slot is None or slot.serial != event.serial or slot.ready:
            return
        out.append(Log(Level.WARNING, "placement_failed", {"worker": slot.index, "member": slot.member,
                                                       "timeout_s": self.placement_timeout_s}))
        if (member := self.members.get(slot.member)) is not None:
            member.failed_placements += 1
        out.append(EndWorker(slot.address))
        self._drop(slot.index, "its worker was never placed", "worker_died", out)
        self._watch_starved(out)

    # -- requests ----------------------------------------------------------------------------
    def _hold(self, event: Requested, out: Out) -> None:
        if len(self._early) >= EARLY_LIMIT:
            out.append(Fail(event.requester, event.request, f"pool not configured yet ({EARLY_LIMIT} requests wait "
                                                             "for its configuration)", "queue_full"))
            return
        self._early.append(event)

    def _cancel_held(self, event: Canceled, out: Out) -> None:
        self._early = [held for held in self._early if held.request.task_id != event.task_id]

    def _requested(self, event: Requested, out: Out) -> None:
        assert self.config is not None
        if not self.idle and len(self.queue) >= self.config.queue_limit:
            out.append(Fail(event.requester, event.request, f"{self.name} pool queue is full "
                            f"({self.config.queue_limit} waiting)", "queue_full"))
            return
        self.next_seq += 1
        self.queue.add(Waiting(self.next_seq, event.request, event.requester))
        self._watch_starved(out)
        if self.budget is not None and self.budget_armed and \
                self.budget.tier_of(event.request.stage, event.request.tier) in self.blocked:
            return  # its tier waits for the armed BudgetDue: reading the queue again would admit nothing
        self._dispatch(out)

    def _finished(self, event: Finished, out: Out) -> None:
        job = self.jobs.pop(event.job, None)
        if job is None:
            # Answered already (deadline, member lost).  A late result the worker sent straight
            # to the requester carries that request's token, which the requester has moved past;
            # one that came through the pool (a home host's, pegasus.pool.home) is dropped here.
            if event.result is not None:
                out.append(Log(Level.INFO, "stale_result_dropped", {
                    "task_id": getattr(event.result, "task_id", None), "token": getattr(event.result, "token", None),
                    "stage": getattr(event.result, "stage", None), "pool": self.name}))
            return
        # A returned result's worker record, with what the pool accounts for beside it (what it learnt).
        worker = {**(getattr(event.result, "worker", None) or {}), **(event.worker or {})}
        if worker.get("known"):  # what the worker learnt of an endpoint: every worker's later jobs start there
            known = merged(self.known, worker["known"])
            if known != self.known:
                self.known, self.known_version = known, self.known_version + 1
            if self.endpoints is not None:
                self.endpoints.learn(self.known)
        if job.canceled:  # nobody waits for its answer (its task was canceled, or it overran and was stopped)
            if self.budget is not None:  # its calls count all the same
                self.budget.settle(event.job, worker, job.requeues)
        elif self.budget is not None and self._rate_limited(event, job, worker, out):
            pass  # queued again, or failed as rate-limited
        elif event.result is not None:  # (None: the worker answered the requester itself)
            out.append(Forward(job.requester, event.result))
        slot = self.slots.get(job.slot)
        if slot is not None and "mcp" in worker:  # its own MCP servers' state (/metrics)
            slot.mcp = worker["mcp"]
        self._heard_from(slot)
        if slot is not None and event.job in slot.jobs:
            self._off_slot(slot, event.job, out, ran=True)
        self._dispatch(out)

    def _held_asked(self, event: HeldAsked, out: Out) -> None:
        """Go if the job is still this worker's (never moved from then on); else it was moved: gone.  Gone too if
        its task was canceled: nobody waits for its answer, so it never runs and the pool is done with it."""
        job = self.jobs.get(event.job)
        slot = self.slots.get(job.slot) if job is not None else None
        if job is None or slot is None or slot.address != event.address or event.job not in slot.jobs:
            out.append(AnswerHeld(event.address, event.job, False))
            return
        out.append(AnswerHeld(event.address, event.job, not job.canceled))
        if not job.canceled:
            job.kept = True
            return
        del self.jobs[event.job]
        self._off_slot(slot, event.job, out, ran=False)
        self._dispatch(out)

    def _move_due(self, event: MoveDue, out: Out) -> None:
        self.move_armed = None
        self._dispatch(out)

    def _rate_limited(self, event: Finished, job: Job, worker: dict[str, Any], out: Out) -> bool:
        """Account for a model call; True when the endpoint rate-limited it: it waits first in line while
        admission pauses for its Retry-After, or, past ``llm.max_retries`` such returns, fails as rate-limited."""
        assert self.budget is not None
        again = self.budget.settle(event.job, worker, job.requeues, ok=getattr(event.result, "ok", True))
        if "retry_after_s" not in worker:
            return False
        out.append(Log(Level.WARNING, "rate_limited", {"task_id": job.request.task_id, "stage": job.request.stage,
                                                   "retry_after_s": worker.get("retry_after_s"),
                                                   "requeues": job.requeues + 1, "again": again}))
        if again:
            self.next_seq += 1
            self.queue.add(Waiting(self.next_seq, job.request, job.requester, requeues=job.requeues + 1), front=True)
        else:
            error = getattr(event.result, "error", None) or "the endpoint answered 429"
            out.append(Fail(job.requester, job.request, f"RateLimited: {error} (sent {job.requeues + 1} times: "
                            f"llm.max_retries = {self.budget.max_requeues})", "rate_limited",
                            {key: value for key, value in worker.items() if key not in ("known", "mcp")}))
        return True

    # -- failures ----------------------------------------------------------------------------
    def _deadline_due(self, event: DeadlineDue, out: Out) -> None:
        self.armed = None
        now = self.clock()
        while self.deadlines and self.deadlines[0][0] <= now:
            _, job_id = heapq.heappop(self.deadlines)
            if (job := self.jobs.get(job_id)) is not None and self.stoppable and not job.canceled:
                self._stop(job_id, job, out, overran=True)
            elif job is not None:
                timeout = self._timeout(job.request)
                out.append(Log(Level.WARNING, "stage_deadline", {"task_id": job.request.task_id,
                                                             "stage": job.request.stage, "timeout_s": timeout}))
                self._replace(job.slot, f"{job.request.stage} overran its {timeout:g}s deadline", "timeout", out,
                              kill=True)
        self._arm(out)

    def _starve_due(self, event: StarveDue, out: Out) -> None:
        waiting = self.queue.get(event.seq)
        if waiting is None:
            return
        waiting.watched = False
        if self.slots:
            return  # workers came (or are being placed): it waits its turn like any other request
        self.queue.remove(waiting)
        out.append(Fail(waiting.requester, waiting.request, f"no {self.name} worker in the convention "
                        f"for {self._timeout(waiting.request):g}s", "timeout"))
        self._watch_starved(out)

    def _budget_due(self, event: BudgetDue, out: Out) -> None:
        self.budget_armed = False
        self._dispatch(out)

    def _health_due(self, event: HealthDue, out: Out) -> None:
        self.health_armed = False
        pids = tuple(s.pid for s in self.slots.values() if s.local and s.jobs and s.pid is not None)
        if pids:
            out.append(Inspect(pids))  # answered by Looked
        else:
            self._arm_health(out)

    def _looked(self, event: Looked, out: Out) -> None:
        """End the busy local workers found stopped twice in a row."""
        for slot in [s for s in self.slots.values() if s.local and s.jobs and s.pid is not None]:
            stopped = event.states.get(slot.pid or 0) in STOPPED_STATES
            slot.stopped_looks = slot.stopped_looks + 1 if stopped else 0
            if slot.stopped_looks >= 2:
                out.append(Log(Level.WARNING, "worker_hung", {"worker": slot.index, "pid": slot.pid,
                                                          "jobs": list(slot.jobs)}))
                self._replace(slot.index, f"stage worker {slot.pid} was stopped (hung)", "worker_died", out,
                              kill=True, rerun=self.name == RERUN_POOL)
        self._arm_health(out)

    def _exited(self, event: Exited, out: Out) -> None:
        # For a worker on a member, the member's admin (its surrogate parent) reports it.
        slot = next((s for s in self.slots.values() if s.address == event.address), None)
        if slot is None:
            return
        out.append(Log(Level.WARNING, "worker_exited", {"worker": slot.index, "member": slot.member, "pid": slot.pid,
                                                    "jobs": list(slot.jobs)}))
        where = "" if slot.local else f" on convention member {slot.member}"
        # A worker on a member is reported dead when its member is lost (often before the membership
        # update says so): its llm stage runs again, a bounded number of times (a request that kills
        # every worker it meets must end).  A local worker's death fails its stage: the task decides.
        rerun = (not slot.local and self.name == RERUN_POOL and bool(slot.jobs)
                 and (job := self.jobs.get(slot.jobs[0])) is not None and job.reruns < MEMBER_RERUNS)
        respawn_s = 0.0
        for command in self.worker_deaths.step(Died(str(slot.index), self.clock(), f"stage worker died{where}")):
            if isinstance(command, Alarm):
                out.append(Log(Level.ERROR, "worker_crash_loop", {"worker": slot.index, "deaths": command.deaths,
                                                              "period_s": command.period_s}))
            elif isinstance(command, StartAgain):
                respawn_s = command.delay_s
        self._replace(slot.index, f"stage worker died{where}", "worker_died", out, kill=False, rerun=rerun,
                      respawn_s=respawn_s)

    def _respawn_due(self, event: RespawnDue, out: Out) -> None:
        if event.index not in self.slots and event.member in self.members and not self.closing:
            self._spawn(event.index, event.member, out)
            self._dispatch(out)

    def _canceled(self, event: Canceled, out: Out) -> None:
        """A canceled task's work: queued requests are dropped, a running stage's worker is
        ended and replaced (a blocking call cannot be interrupted otherwise), a held one
        still runs (see below); nobody waits for those answers any more."""
        self.queue.drop_task(event.task_id)
        for job_id, job in list(self.jobs.items()):
            if job.request.task_id != event.task_id or job_id not in self.jobs:
                continue
            if self.slots[job.slot].jobs[0] != job_id:
                # Held in the worker's mailbox, behind another task's stage: it runs and its
                # answer is dropped.  Ending the worker when it gets there could lose the
                # result it has just sent for that other task (a SIGKILL does not wait for
                # the runtime's transmits), so it is left alone; never queued again.
                job.canceled = True
            elif self.stoppable:
                self._stop(job_id, job, out, overran=False)
            else:
                out.append(Log(Level.INFO, "stage_canceled", {"task_id": event.task_id, "stage": job.request.stage,
                                                          "worker": job.slot}))
                self._replace(job.slot, "the task was canceled", "exception", out, kill=True)

    def _stop(self, job_id: int, job: Job, out: Out, *, overran: bool) -> None:
        """Have the worker stop a streamed stage and stay: it closes the stream and reports the job
        done (its answer dropped).  One that overran is answered ``timeout`` now; either way a worker
        that has not stopped within ``STOP_GRACE_S`` is ended like a hung one."""
        job.canceled = True
        slot = self.slots[job.slot]
        timeout = self._timeout(job.request)
        out.append(Log(Level.INFO if not overran else Level.WARNING, "stage_stopping",
                       {"task_id": job.request.task_id, "stage": job.request.stage, "worker": job.slot,
                        "why": f"overran its {timeout:g}s deadline" if overran else "canceled"}))
        out.append(Stop(slot.address, job_id))
        if overran:
            out.append(Fail(job.requester, job.request, f"{job.request.stage} overran its {timeout:g}s deadline",
                            "timeout", {"pool": self.name, "index": slot.index, "pid": slot.pid}))
        heapq.heappush(self.deadlines, (self.clock() + STOP_GRACE_S, job_id))
        self._arm(out)

    # -- observation and shutdown ------------------------------------------------------------
    def _stats(self, event: StatsAsked, out: Out) -> None:
        slots = sorted(self.slots.values(), key=lambda s: s.index)
        workers = [s.view([self.jobs[j].request.task_id for j in s.jobs if j in self.jobs]) for s in slots]
        members = [m.view(sum(1 for s in slots if s.member == m.name))
                   for m in sorted(self.members.values(), key=lambda m: (m.address is not None, m.name))]
        out.append(SendStats(event.requester, event.ask_id, {
            "name": self.name, "size": len(slots), "busy": sum(1 for s in slots if s.jobs), "queued": len(self.queue),
            "replaced": self.replaced, "workers": workers, "members": members,
            "budget": self.budget.view() if self.budget is not None else None, "ladder": ladder_view(self.known),
            "model_requests": self.budget.counts() if self.budget is not None else None}))

    def _closing(self, event: Closing, out: Out) -> None:
        # Every worker is told to exit (remote ones too: their member does not know they are
        # orphans), so shutdown never waits on a forgotten child.
        self.closing = True
        if self.lead:
            out.append(Watch(False))
        for slot in self.slots.values():
            # A busy one would read its exit request only when its blocking call returns: ended
            # now, like a crash.  Its step's journal row says
            # what is known (an effectful one: effects_unknown).
            busy_child = slot.pid if slot.jobs and slot.local else None
            out.append(EndWorker(slot.address, busy_child, shutdown=True))
