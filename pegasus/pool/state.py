"""A pool core's records (worker slots, convention members, jobs handed out, requests waiting) and the
moves its inputs share: start a worker, hand out queued requests, keep the deadline timer, drop or
replace a worker.  Pure, like the core (pegasus/pool/core.py) built on it."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pegasus.llm.budget import LlmBudget
from pegasus.pool.commands import Arm, Dispatch, EndWorker, Fail, Log, PoolCommand, StartWorker
from pegasus.pool.contact import Contact
from pegasus.pool.endpoints import EndpointLimits
from pegasus.levels import Level
from pegasus.pool.inputs import (
    BudgetDue, DeadlineDue, HealthDue, MoveDue, PoolSpec, RespawnDue, StageAsk, StarveDue,
)
from pegasus.pool.order import WaitQueue, Waiting
from pegasus.pool.placement import HOME_CAPABILITY, MEMBER_CAPABILITY, placement

HEALTH_PERIOD_S = 0.5  # how often busy local workers are looked at for being stopped (hung)
# A held request moves only from behind a call this many times the pool's mean call (and at least
# held_move_after_s): from behind an outlier, not from behind every call of a pool of long calls, whose
# workers would then ask before each held request (a round trip through the pool, which prefetch saves).
MOVE_MEAN_FACTOR = 4.0
CALL_MEAN_WEIGHT = 0.1  # the weight of the latest call in the pool's running mean

Out = list[PoolCommand]


@dataclass
class Slot:
    """One worker.  ``address`` is None only between StartWorker and its Created."""

    index: int
    address: Any
    member: str  # the convention member (admin) it runs on; the pool's own for local workers
    local: bool  # created by the pool's process on its own admin (only these may be SIGKILLed)
    serial: int
    ready: bool = False
    pid: int | None = None
    host: str | None = None
    jobs: deque[int] = field(default_factory=deque)  # handed to it, in order; the first one runs
    since: float = 0.0  # (clock) when the running job started
    stopped_looks: int = 0  # health looks in a row that found its process stopped
    mcp: dict[str, Any] = field(default_factory=dict)  # its scope = "worker" MCP servers at its last stage's end
    known_told: int = 0  # the pool's ``known_version`` this worker was last handed (a new worker: none)

    def view(self, tasks: list[str]) -> dict[str, Any]:
        return {"index": self.index, "pid": self.pid, "host": self.host, "busy": bool(self.jobs),
                "member": self.member, "ready": self.ready, "held": max(0, len(self.jobs) - 1), "tasks": tasks,
                **({"mcp": self.mcp} if self.mcp else {})}


@dataclass
class Member:
    name: str
    address: Any  # the member admin's address; None for the pool's own admin
    capabilities: dict[str, Any]
    wanted: int
    joined: float  # wall clock
    failed_placements: int = 0
    contact: Contact = field(default_factory=Contact)

    def view(self, workers: int) -> dict[str, Any]:
        return {"name": self.name, "address": None if self.address is None else str(self.address),
                "local": self.address is None, "wanted": self.wanted, "workers": workers,
                "capabilities": {k: v for k, v in self.capabilities.items() if k.startswith("pegasus.")},
                "failed_placements": self.failed_placements, "joined": self.joined,
                "contact": None if self.address is None else self.contact.view()}


@dataclass
class Job:
    request: StageAsk
    requester: Any
    slot: int
    requeues: int = 0
    seq: int = 0  # its place in the queue it came from (kept when it goes back there)
    canceled: bool = False  # its task was canceled while it waited in the worker's mailbox: never requeued
    reruns: int = 0  # times it ran again because its worker was lost with its member
    kept: bool = False  # its worker was told to begin it (held, after a long call): never moved
    move_after_s: float = 0.0  # held: it may move once its holder's call ran this long (0: never)


def member_name_of(capabilities: dict[str, Any]) -> str | None:
    """The name a convention member advertises, if it is a Pegasus admin."""
    name = capabilities.get(MEMBER_CAPABILITY)
    return name if isinstance(name, str) else None


class JobNumbers:
    """The job numbers a pool hands out.  A home's pools share one (``pegasus.pool.home``): a number then
    names one job of one pool, and a worker's answer finds its pool by it."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = 0

    def take(self) -> int:
        self.last += 1
        return self.last


class PoolState:
    def __init__(self, clock: Callable[[], float], wall_clock: Callable[[], float],
                 job_numbers: JobNumbers | None = None) -> None:
        self.clock, self.wall_clock = clock, wall_clock
        self.job_numbers = job_numbers or JobNumbers()
        self.config: PoolSpec | None = None
        self.name, self.me, self.lead, self.placement_timeout_s = "?", "", False, 0.0
        self.slots: dict[int, Slot] = {}
        self.idle: deque[int] = deque()
        self.queue = WaitQueue()  # in hand-out order (pegasus.pool.order)
        self.jobs: dict[int, Job] = {}
        self.members: dict[str, Member] = {}
        self.deadlines: list[tuple[float, int]] = []  # heap of (clock due, job)
        self.armed: float | None = None  # when the pending DeadlineDue fires
        self.budget: LlmBudget | None = None  # the llm pool's rate budget (a model provider)
        self.budget_armed = False
        self.blocked: frozenset[str] = frozenset()  # the tiers the last admission pass found over budget
        self.endpoints: EndpointLimits | None = None  # requests each endpoint may be sent at once (with a budget)
        self.health_armed = False
        self.prefetch = 0  # requests a busy worker may hold (none under a rate budget)
        self.move_after_s = 0.0  # a held request moves to an idle worker once its holder's call ran this long
        self.move_armed: float | None = None  # when the pending MoveDue fires
        self.call_mean_s = 0.0  # the running mean of its calls, as the pool counts them (set with move_after_s)
        self.closing = False  # told to exit: replace nothing any more
        # What its workers learnt of each endpoint (pegasus.llm.ladder), handed to each worker: one refusal a system.
        self.known: dict[str, dict[str, Any]] = {}
        self.known_version = 0  # how often ``known`` changed: a worker is handed it again only when it did
        self.next_seq = self.next_serial = self.next_index = self.replaced = 0

    def _new_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    def _spawn(self, index: int, member: str, out: Out) -> None:
        assert self.config is not None
        settings, requirements = self.config.settings, None
        if member != self.me:
            requirements = placement(member, self.name)
            # A remote worker logs under its member's state directory, not the leader's path.
            home = str(self.members[member].capabilities.get(HOME_CAPABILITY, ""))
            settings = settings.model_copy(update={"state": settings.state.model_copy(update={"home": home})})
        self.next_serial += 1
        self.slots[index] = Slot(index, None, member, member == self.me, self.next_serial)
        out.append(StartWorker(self.name, index, requirements, settings))

    def _dispatch(self, out: Out) -> None:
        while self.queue and (slot := self._next_slot()) is not None:
            waiting = self.queue.first(idle=not slot.jobs, workers=len(self.slots), spare=self._spare)
            if waiting is None:  # only low-priority requests wait, and this worker is busy or kept for stages
                if not slot.jobs:
                    self.idle.appendleft(slot.index)
                    self._move_held(out)  # (only low-priority requests wait: a held one comes before them)
                return
            if slot.jobs and waiting.request.journal_to is not None:
                return  # an effectful step waits for an idle worker: held, a kill meant for the one before cuts it off
            if self.budget is not None:  # (such a pool never prefetches: the slot was idle)
                found = self._admitted(self.budget)
                if found is None:  # every tier waiting is at its endpoint's limit: a Finished frees one
                    self.idle.appendleft(slot.index)
                    return
                if isinstance(found, float):  # every tier waiting is over its budget (or paused by a 429)
                    self.idle.appendleft(slot.index)
                    if not self.budget_armed:
                        self.budget_armed = True
                        out.append(Arm(found, BudgetDue()))
                    return
                waiting = found
            self.queue.take(waiting)
            self._hand_out(slot, Job(waiting.request, waiting.requester, slot.index, waiting.requeues, waiting.seq,
                                     reruns=waiting.reruns), out)
        self._move_held(out)

    def _hand_out(self, slot: Slot, job: Job, out: Out) -> None:
        """Give ``job`` (its ``slot`` set) to the worker of ``slot`` under a new job number."""
        number = self.job_numbers.take()
        self.jobs[number] = job
        slot.jobs.append(number)
        # What its process has adopted stays there: a worker is handed the ladder once after each change.
        known = tuple(self.known.items()) if slot.known_told != self.known_version else ()
        slot.known_told = self.known_version
        held = len(slot.jobs) > 1
        job.move_after_s = self._move_bar_s() if held else 0.0  # (a moved one: never moved again)
        out.append(Dispatch(slot.address, number, job.request, job.requester, self._timeout(job.request), known,
                            held=held, move_after_s=job.move_after_s))
        if len(slot.jobs) == 1:
            self._started(slot, out)

    def _move_held(self, out: Out) -> None:
        """A worker idle (nothing queued it may take): a request held (prefetched) by a worker whose call has
        run the request's ``move_after_s`` (told to the worker with it) moves to it under a new job number.
        Its old worker, past half that, asks before it begins a held one (``HeldAsked``) and is told it is
        gone.  A younger call: a MoveDue looks again when it is old enough."""
        if not self.move_after_s or not self.idle:
            return
        while self._spare():
            # Only the next one: its worker asks about it against the call it waits behind, the running one,
            # while one behind it waits behind another call (it moves once next, timed from that call's start).
            held = [(slot.since + job.move_after_s, number) for slot in self.slots.values() if len(slot.jobs) > 1
                    if (job := self.jobs.get(number := slot.jobs[1])) is not None
                    and job.move_after_s and not job.kept and not job.canceled]
            if not held:
                return
            due, number = min(held)
            if self.clock() < due:
                self._arm_move(due, out)
                return
            if (slot := self._idle_slot()) is None:
                return
            job = self.jobs.pop(number)
            self.slots[job.slot].jobs.remove(number)
            out.append(Log(Level.INFO, "held_moved", {"task_id": job.request.task_id, "stage": job.request.stage,
                                                      "from": job.slot, "to": slot.index}))
            job.slot = slot.index
            self._hand_out(slot, job, out)

    def _move_bar_s(self) -> float:
        """How long a held request's holder's call must run before it moves (0: never)."""
        return max(self.move_after_s, MOVE_MEAN_FACTOR * self.call_mean_s) if self.move_after_s else 0.0

    def _call_ran(self, seconds: float) -> None:
        # Clipped at the bar: one outlier (what a move is for) raises the mean a tenth of the bar at most, not a
        # tenth of itself; a pool of long calls raises the bar up to three tenths a call until it passes them.
        self.call_mean_s += (min(seconds, self._move_bar_s()) - self.call_mean_s) * CALL_MEAN_WEIGHT

    def _arm_move(self, at: float, out: Out) -> None:
        if self.move_armed is None or at < self.move_armed:
            self.move_armed = at
            out.append(Arm(max(0.0, at - self.clock()), MoveDue()))

    def _spare(self) -> int:
        """Idle workers (besides one just taken off ``idle``)."""
        return sum(1 for index in self.idle if (s := self.slots.get(index)) is not None and s.ready and not s.jobs)

    def _admitted(self, budget: LlmBudget) -> Waiting | float | None:
        """The first request (in hand-out order) its tier's budget and endpoint admit now, else the
        shortest wait for a budget, else None (every tier waiting is at its endpoint's limit).

        Requests of one tier keep their order (a refused one stays first of its tier); one of a
        tier with room passes those of a tier over its budget.  One admission test per tier."""
        refused: dict[str, float] = {}
        full: set[str] = set()
        self.blocked = frozenset()
        for waiting in self.queue.ordered(len(self.slots), self._spare):
            tier = budget.tier_of(waiting.request.stage, waiting.request.tier)
            if tier in refused or tier in full:
                continue
            if self._endpoint_full(budget, tier):
                full.add(tier)
                if len(refused) + len(full) == budget.tier_count:
                    break
                continue
            wait = budget.admit(waiting.request.context, self.job_numbers.last + 1, waiting.request.stage, tier)
            if wait <= 0:
                return waiting
            refused[tier] = wait
            if len(refused) + len(full) == budget.tier_count:
                break  # every tier is refused: the rest of the queue need not be read
        self.blocked = frozenset(refused)
        return min(refused.values()) if refused else None

    def _endpoint_full(self, budget: LlmBudget, tier: str) -> bool:
        """Whether the tier's endpoint has as many jobs running as it may (pegasus.pool.endpoints)."""
        if self.endpoints is None:
            return False
        endpoint, limit = self.endpoints.of(tier)
        return bool(limit) and sum(self.endpoints.of(budget.tier_of(job.request.stage, job.request.tier))[0] == endpoint
                                   for job in self.jobs.values()) >= limit

    def _next_slot(self) -> Slot | None:
        """The first idle worker; failing that (prefetch), the busy one with room whose stage started first."""
        if (slot := self._idle_slot()) is not None:
            return slot
        if not self.prefetch:
            return None
        room = [s for s in self.slots.values() if s.ready and 0 < len(s.jobs) <= self.prefetch]
        return min(room, key=lambda s: (len(s.jobs), s.since), default=None)

    def _idle_slot(self) -> Slot | None:
        """The first idle worker, taken off ``idle``."""
        while self.idle:
            slot = self.slots.get(self.idle.popleft())
            if slot is not None and slot.ready and not slot.jobs:
                return slot
        return None

    def _off_slot(self, slot: Slot, number: int, out: Out, *, ran: bool) -> None:
        """Job ``number`` is over on ``slot``'s worker (``ran``: a call the running mean counts)."""
        first = slot.jobs[0] == number
        if first and ran:
            self._call_ran(self.clock() - slot.since)
        slot.jobs.remove(number)
        if not slot.jobs:
            self.idle.append(slot.index)
        elif first:
            self._started(slot, out)  # the worker has already begun the request it held

    def _started(self, slot: Slot, out: Out) -> None:
        """The slot's first job runs from now: its deadline starts."""
        job_id = slot.jobs[0]
        slot.since = self.clock()
        heapq.heappush(self.deadlines, (slot.since + self._timeout(self.jobs[job_id].request), job_id))
        self._arm(out)
        if slot.local:
            self._arm_health(out)

    def _arm(self, out: Out) -> None:
        """Keep one DeadlineDue pending, for the earliest deadline of a job still running."""
        while self.deadlines and self.deadlines[0][1] not in self.jobs:
            heapq.heappop(self.deadlines)  # answered in time: forget it
        if self.deadlines and (self.armed is None or self.deadlines[0][0] < self.armed):
            self.armed = self.deadlines[0][0]
            out.append(Arm(max(0.0, self.armed - self.clock()), DeadlineDue()))

    def _timeout(self, request: StageAsk) -> float:
        assert self.config is not None
        return request.timeout_s or self.config.timeout_s

    def _watch_starved(self, out: Out) -> None:
        """With no worker at all (none local, no member offering any), queued requests wait one timeout at most."""
        if self.slots:
            return
        for waiting in self.queue:
            if not waiting.watched:
                waiting.watched = True
                out.append(Arm(self._timeout(waiting.request), StarveDue(waiting.seq)))

    def _arm_health(self, out: Out) -> None:
        if not self.health_armed and not self.closing and any(s.local and s.jobs for s in self.slots.values()):
            self.health_armed = True
            out.append(Arm(HEALTH_PERIOD_S, HealthDue()))

    def _drop(self, index: int, reason: str, kind: str, out: Out, *, rerun: bool = False) -> Slot | None:
        """Remove a slot; answer its running job (if any) as failed, and queue again, first in
        line, the jobs it held but never started (prefetch).  ``rerun``: its running job (an llm
        stage, which has no side effect) goes back to the queue too.  Returns the slot."""
        slot = self.slots.pop(index, None)
        if slot is None:
            return None
        if index in self.idle:
            self.idle.remove(index)
        if not slot.jobs:
            return slot
        running, *held = slot.jobs
        if rerun and self.budget is not None and running in self.jobs:
            self.budget.release(running)  # admitted again when it runs again
        for job_id in reversed([running, *held] if rerun else held):
            if (job := self.jobs.pop(job_id, None)) is not None and not job.canceled:
                self.queue.add(Waiting(job.seq, job.request, job.requester, requeues=job.requeues,
                                       reruns=job.reruns + (job_id == running)), front=True)
        if (job := self.jobs.pop(running, None)) is not None:
            if self.budget is not None:
                self.budget.release(running)
            worker = {"pool": self.name, "index": index, "pid": slot.pid, "host": slot.host, "member": slot.member}
            out.append(Fail(job.requester, job.request, reason, kind, worker))
        return slot

    def _replace(self, index: int, reason: str, kind: str, out: Out, *, kill: bool, rerun: bool = False,
                 respawn_s: float = 0.0) -> None:
        """Answer the slot's job as failed (``rerun``: queue it again), end the worker, start a
        fresh one on the same member (after ``respawn_s``: a worker that keeps dying, pegasus.supervision)."""
        slot = self._drop(index, reason, kind, out, rerun=rerun)
        if slot is None:
            return
        if kill or not slot.local:
            # A remote worker stuck in a blocking call cannot be killed from here: it exits
            # when the call returns and it reads the exit request.  A remote worker reported dead
            # may be alive: when a member leaves, the leader's admin fails the creations it
            # forwarded there, which reaches us as the exit of workers that still run.
            out.append(EndWorker(slot.address, slot.pid if kill and slot.local else None))
        self.replaced += 1
        if respawn_s > 0:
            out.append(Arm(respawn_s, RespawnDue(index, slot.member)))
        elif slot.member in self.members and not self.closing:
            self._spawn(index, slot.member, out)
        self._watch_starved(out)
        self._dispatch(out)
