"""The order a pool hands out what waits: work coming back first, then task stages by their task's priority and
first come first, a task already served here moved ahead by a share of its age, the low lane (post-task
reflections) last and only beside a reserve of idle workers.

Pure first come moves many tasks in flight in lockstep, so the next pool (tools) gets all its work at the tail;
the age share feeds it from the start (simulated: docs/performance.md, "The pool's order at the tail" and
"Issue 33: the tail in flight").  No request waits for ever: once ``BYPASS_ROUNDS`` x the pool's workers requests
were handed out since it came, it goes before all others not overdue, in arrival order.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pegasus.pool.inputs import StageAsk
from pegasus.task.names import StageName

# The lowest lane: handed out only when no other request waits, and only to an idle worker (never prefetched
# behind a busy one) that leaves LOW_RESERVE of the workers idle, so it never takes the worker a task's next
# stage needs (the post-task reflector, the background job giving memory rows their vectors); until overdue.
LOW_PRIORITY = frozenset({StageName.POST_REFLECT, StageName.EMBED_ROWS})
FRONT, STAGE, LOW = 0, 1, 2  # lanes: work handed out before and coming back (a worker lost, rate-limited); the rest
BYPASS_ROUNDS = 32  # a request is overdue once this many x the pool's workers later ones were handed out
LOW_RESERVE = 0.5  # the share of a pool's workers (rounded down) a LOW request leaves idle for task stages
AGE_SHARE = 0.3  # a request's place: its arrival less this share of the arrivals since its task's first one here
TASKS_REMEMBERED = 8192  # tasks whose first arrival a pool keeps; an older one forgotten counts as new (order only)


@dataclass
class Waiting:
    seq: int
    request: StageAsk
    requester: Any
    watched: bool = False  # a StarveDue is pending for it
    requeues: int = 0  # times it came back rate-limited (llm pool)
    reruns: int = 0  # see Job.reruns
    lane: int = STAGE  # set by WaitQueue.add
    mark: int = 0  # the queue's handouts when it came (WaitQueue.add): how long it has waited
    place: float = 0.0  # set by WaitQueue.add: its arrival, moved ahead by a share of its task's age here


def order_key(waiting: Waiting) -> tuple[int, int, float, int]:
    """Lane, then the task's priority (lower first, as admission), then its place (arrival and task's age)."""
    return waiting.lane, waiting.request.priority, waiting.place, waiting.seq


class WaitQueue:
    """The requests a pool holds, in ``order_key`` order, with the wait bound.  Removal is lazy (O(log n) a
    hand-out): an entry whose request left the queue is skipped when it comes up.  Marks only grow, so the
    arrival order is a deque."""

    def __init__(self) -> None:
        self.handouts = 0
        self._live: dict[int, Waiting] = {}  # seq -> the request waiting under it
        self._by_order: list[tuple[tuple[int, int, float, int], int, Waiting]] = []
        self._by_arrival: deque[Waiting] = deque()
        self._tickets = itertools.count()
        self._first_seen: OrderedDict[str, int] = OrderedDict()  # task -> seq of its first request here

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Waiting]:
        return iter(list(self._live.values()))

    def get(self, seq: int) -> Waiting | None:
        return self._live.get(seq)

    def add(self, waiting: Waiting, *, front: bool = False) -> None:
        """Queue it: ``front`` (work that was handed out before) goes before every task stage."""
        waiting.lane = FRONT if front else LOW if waiting.request.stage in LOW_PRIORITY else STAGE
        waiting.mark = self.handouts
        waiting.place = waiting.seq - AGE_SHARE * max(0, waiting.seq - self._first(waiting))
        self._live[waiting.seq] = waiting
        ticket = next(self._tickets)
        heapq.heappush(self._by_order, (order_key(waiting), ticket, waiting))
        self._by_arrival.append(waiting)

    def remove(self, waiting: Waiting) -> None:
        if self._live.get(waiting.seq) is waiting:
            del self._live[waiting.seq]
            self._compact()

    def take(self, waiting: Waiting) -> None:
        """It is handed out: gone from the queue, and one more hand-out counts against every other's wait."""
        self.remove(waiting)
        self.handouts += 1

    def drop_task(self, task_id: str) -> None:
        for waiting in [w for w in self._live.values() if w.request.task_id == task_id]:
            self.remove(waiting)
        self._first_seen.pop(task_id, None)

    def _first(self, waiting: Waiting) -> int:
        """The seq of its task's first request here (this one's if none came before)."""
        first = self._first_seen.setdefault(waiting.request.task_id, waiting.seq)
        if len(self._first_seen) > TASKS_REMEMBERED:
            self._first_seen.popitem(last=False)
        return first

    def overdue(self, waiting: Waiting, workers: int) -> bool:
        return self.handouts - waiting.mark >= BYPASS_ROUNDS * max(1, workers)

    def first(self, *, idle: bool, workers: int, spare: Callable[[], int]) -> Waiting | None:
        """What to hand out next to a worker (``idle``: one running nothing; ``spare``: the other idle ones) of
        a pool of ``workers``: the earliest-come overdue request, else the first in order; a LOW one only to
        an idle worker that leaves ``LOW_RESERVE`` of the workers idle beside it."""
        arrival, live = self._by_arrival, self._live
        while arrival and live.get(arrival[0].seq) is not arrival[0]:
            arrival.popleft()  # left the queue
        if arrival and self.overdue(arrival[0], workers):
            return arrival[0]
        best = self._top(self._by_order)
        if best is None or best.lane != LOW:
            return best
        return best if idle and self._low_fits(workers, spare) else None

    def ordered(self, workers: int, spare: Callable[[], int]) -> list[Waiting]:
        """What an idle worker may take, in hand-out order (a rate budget reads on past those it refuses)."""
        overdue = sorted((w for w in self._live.values() if self.overdue(w, workers)), key=lambda w: w.mark)
        low = self._low_fits(workers, spare)
        rest = sorted((w for w in self._live.values() if not self.overdue(w, workers) and (low or w.lane != LOW)),
                      key=order_key)
        return overdue + rest

    @staticmethod
    def _low_fits(workers: int, spare: Callable[[], int]) -> bool:
        return spare() >= int(workers * LOW_RESERVE)

    def _top(self, heap: list[tuple[tuple[int, int, float, int], int, Waiting]]) -> Waiting | None:
        while heap and self._live.get(heap[0][2].seq) is not heap[0][2]:
            heapq.heappop(heap)  # left the queue
        return heap[0][2] if heap else None

    def _compact(self) -> None:
        """Drop the entries of requests gone once they outnumber the live ones (a canceled task's many)."""
        if len(self._by_order) > 2 * len(self._live) + 64:
            self._by_order = [e for e in self._by_order if self._live.get(e[2].seq) is e[2]]
            self._by_arrival = deque(w for w in self._by_arrival if self._live.get(w.seq) is w)
            heapq.heapify(self._by_order)
