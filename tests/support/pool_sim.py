"""Classic tasks in flight through two real pool cores on a simulated clock: the pools' order alone, no CPU.

Each task: perceive, think, plan (llm), two act steps (tool), reflect (llm), then its post-task reflection
(llm, the low lane).  Every stage takes ``stage_s``; a task asks for its next stage ``gap_s`` after an answer.
A worker runs what it was handed in order: with ``llm_prefetch`` and ``tool_prefetch`` (as ``[pools]``) a busy
one holds the next.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from pegasus.pool.commands import Dispatch, PoolCommand
from pegasus.pool.inputs import Requested
from pegasus.task.names import StageName
from tests.support.pool_core import Ask, Pool

CLASSIC = (("llm", "perceive"), ("llm", "think"), ("llm", "plan"), ("tool", "act"), ("tool", "act"),
           ("llm", "reflect"))
REFLECTION = -1  # the token of a post-task reflection


@dataclass
class Outcome:
    done: dict[str, float]  # task -> when its last stage ended
    reflected: dict[str, float]  # task -> when its post-task reflection ended

    @property
    def completion_s(self) -> float:
        return max(self.done.values())


def run(tasks: int, workers: int = 100, stage_s: float = 2.0, gap_s: float = 0.05, submit_s: float = 1.0,
        reflect: bool = True, jitter: Callable[[], float] = lambda: 0.0, llm_prefetch: int = 0,
        tool_prefetch: int = 0, answer_lag_s: float = 0.0) -> Outcome:
    """Submit ``tasks`` over ``submit_s``; run them to their end (``reflect``: and their post-task reflections).
    ``jitter``: a delay added to each ask for a next stage (a loaded machine's).  ``answer_lag_s``: how late
    a worker's answer reaches its pool and task (a busy home host reading it), while the worker goes on at
    once to a job it holds."""
    pools = {"llm": Pool(size=workers, queue_limit=10 * tasks, prefetch=llm_prefetch),
             "tool": Pool(name="tool", size=workers, queue_limit=10 * tasks, prefetch=tool_prefetch)}
    free: dict[tuple[str, object], float] = {}  # (pool, worker) -> when it ends what it was handed
    events: list[tuple[float, int, str, str, int, int]] = []  # (when, tiebreak, what, task, stage, job)
    order = itertools.count()
    submitted = {f"t{n:05d}": n * submit_s / tasks for n in range(tasks)}
    outcome = Outcome({}, {})

    def handed_out(pool: str, commands: list[PoolCommand], now: float) -> None:
        for command in commands:
            if isinstance(command, Dispatch):
                request = command.request
                ends = free[pool, command.worker] = max(now, free.get((pool, command.worker), now)) + stage_s
                heapq.heappush(events, (ends + answer_lag_s, next(order), f"end:{pool}", request.task_id,
                                        request.token, command.job))

    def ask(task: str, index: int, now: float) -> None:
        pool, stage = CLASSIC[index] if index != REFLECTION else ("llm", StageName.POST_REFLECT)
        core = pools[pool]
        core.clock.now = now
        handed_out(pool, core.step(Requested(Ask(task, token=index, stage=stage), f"requester-{task}")), now)

    for task, at in submitted.items():
        heapq.heappush(events, (at, next(order), "ask", task, 0, 0))
    while events:
        now, _, what, task, index, job = heapq.heappop(events)
        if what == "ask":
            ask(task, index, now)
            continue
        pool = what.split(":")[1]
        pools[pool].clock.now = now
        handed_out(pool, pools[pool].finish(job), now)
        if index == REFLECTION:
            outcome.reflected[task] = now
        elif index + 1 < len(CLASSIC):
            heapq.heappush(events, (now + gap_s + jitter(), next(order), "ask", task, index + 1, 0))
        else:
            outcome.done[task] = now
            if reflect:
                heapq.heappush(events, (now + gap_s, next(order), "ask", task, REFLECTION, 0))
    return outcome
