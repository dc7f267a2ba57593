"""A home host's pools: the stage pools' cores run inside a task actor, beside the runs that ask them.

A stage asked in that process reaches its pool without a message, and its worker answers in the one
message that also frees it (``Dispatch.through_pool``): two messages a stage instead of four (the request to
the pool, the pool's hand-out, the answer, the worker's "free").  Requests from elsewhere (another task
actor, the supervisor) are served as by a pool process of their own.  Each pool is a whole ``PoolCore``
(composed, not copied): this routes inputs to it and marks what is for here.  Pure, never raises
(docs/architecture.md, "The home host").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pegasus.core_error import error_log
from pegasus.pool.commands import Dispatch, Fail, Forward, PoolCommand
from pegasus.pool.core import PoolCore
from pegasus.pool.state import JobNumbers
from pegasus.pool.inputs import (
    Canceled,
    Closing,
    Configured,
    Created,
    Exited,
    Finished,
    MemberChanged,
    PoolInput,
    PoolSpec,
    Requested,
    StageAsk,
    StatsAsked,
)
from pegasus.task.names import PoolName


class _Here:
    """The requester of a stage asked in the home's own process (a run it holds)."""

    def __repr__(self) -> str:
        return "HERE"


HERE = _Here()
EVERY_POOL = (MemberChanged, Canceled, StatsAsked, Closing)  # told to each pool of the home
HOSTED = (PoolName.LLM.value, PoolName.TOOL.value)  # the pools a home runs


class HomeAsk(StageAsk, Protocol):
    """A stage request as a home reads it: which of its pools it is for (actors.messages.StageRequest)."""

    @property
    def pool(self) -> str: ...


@dataclass(frozen=True, slots=True)
class PoolTimer:
    """A pool core's timer, armed by the home: handed back to that pool when it fires."""

    pool: str
    timer: Any


@dataclass(frozen=True, slots=True)
class ForPool:
    """Pool ``pool``'s command: its carrier carries it out (``HERE`` as an address: this process)."""

    pool: str
    command: PoolCommand


Out = list[ForPool]


class HomePools:
    """The pools one process hosts; see the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.clock, self.wall_clock = clock, wall_clock
        self.cores: dict[str, PoolCore] = {}
        self.job_numbers = JobNumbers()  # shared by its pools: a worker's answer finds its pool by its job
        self._workers: list[tuple[Any, str]] = []  # (address, pool): runtime addresses compare, they need not hash
        # Requests for a hosted pool not configured yet: a task actor told of a new home (PoolReplaced) may ask it
        # before the supervisor's PoolConfig arrives (two senders: no order between them).
        self.early: list[tuple[HomeAsk, Any]] = []

    def hosts(self, pool: str) -> bool:
        return pool in self.cores

    def configure(self, config: PoolSpec, me: str) -> Out:
        """Host pool ``config.name`` from now on (its workers start); a second configuration is ignored."""
        if config.name in self.cores:
            return []
        self.cores[config.name] = PoolCore(self.clock, self.wall_clock, self.job_numbers)
        out = self.to_pool(config.name, Configured(config, me))
        held, self.early = [e for e in self.early if e[0].pool == config.name], \
            [e for e in self.early if e[0].pool != config.name]
        return out + [command for request, requester in held for command in self.ask(request, requester)]

    def ask(self, request: HomeAsk, requester: Any = HERE) -> Out:
        """A stage for pool ``request.pool``: from a run here (``HERE``), or sent by ``requester``."""
        if request.pool not in self.cores and request.pool in HOSTED:
            self.early.append((request, requester))
            return []
        if request.pool not in self.cores:
            return [ForPool(request.pool, Fail(requester, request, f"no {request.pool or 'unnamed'} pool in the "
                                               f"home host (it runs {', '.join(sorted(self.cores)) or 'none'})",
                                               "exception"))]
        return self.to_pool(request.pool, Requested(request, requester))

    def take(self, event: PoolInput | PoolTimer, sender: Any = None) -> Out:
        """Any other input: a worker's answer to the pool whose job it is, else to the pool whose worker ``sender``
        (or the input's address) is; to the pool whose timer fired, or to every pool (membership, cancel, stats,
        closing).  Unknown workers are ignored."""
        try:
            if type(event) is Finished:  # the stage path: found by its job (numbers shared by the home's pools)
                pool = self._pool_of_job(event.job, sender)
                if pool is not None:
                    return self.to_pool(pool, event)
            if isinstance(event, PoolTimer):
                return self.to_pool(event.pool, event.timer) if event.pool in self.cores else []
            if isinstance(event, Canceled):
                self.early = [(request, to) for request, to in self.early if request.task_id != event.task_id]
            if isinstance(event, EVERY_POOL):
                return [command for pool in list(self.cores) for command in self.to_pool(pool, event)]
            address = sender if isinstance(event, Finished) else getattr(event, "address", None)
            pool = self.pool_of(address)
            if pool is None:
                return []
            if isinstance(event, Exited):
                self._workers = [(known, name) for known, name in self._workers if known != address]
            return self.to_pool(pool, event)
        except Exception as exc:  # noqa: BLE001 - routing must never take the host down
            return [ForPool("", error_log("home_pools", event, exc))]

    def _pool_of_job(self, job: int, sender: Any) -> str | None:
        """The pool running job ``job`` on worker ``sender`` (None: no pool here has it, e.g. answered already, or
        another worker answers it: a late answer of a replaced home's worker may carry a number reused here)."""
        for pool, core in self.cores.items():
            running = core.jobs.get(job)
            if running is not None:
                slot = core.slots.get(running.slot)
                return pool if slot is not None and (slot.address is sender or slot.address == sender) else None
        return None

    def pool_of(self, address: Any) -> str | None:
        """The pool whose worker is at ``address`` (None: no worker of this home)."""
        return next((pool for known, pool in self._workers if known == address), None) if address is not None \
            else None

    def to_pool(self, pool: str, event: PoolInput) -> Out:
        """Step pool ``pool`` (hosted here) with ``event``: its commands, marked."""
        if isinstance(event, Created):
            self._workers.append((event.address, pool))
        out = [ForPool(pool, self._here(command)) for command in self.cores[pool].step(event)]
        # A freed worker's next job leaves before a run here takes its answer: that run's transition, in this same
        # process, would hold the hand-out up (a pool of its own handed out while the task actor ran it).
        here = [marked for marked in out if _for_here(marked.command)]
        return [marked for marked in out if not _for_here(marked.command)] + here if here else out

    @staticmethod
    def _here(command: PoolCommand) -> PoolCommand:
        """A hand-out for a run here is answered through the pool: in the worker's one message back."""
        if type(command) is Dispatch and command.requester is HERE:
            return replace(command, through_pool=True)
        return command


def _for_here(command: PoolCommand) -> bool:
    return isinstance(command, (Forward, Fail)) and command.to is HERE
