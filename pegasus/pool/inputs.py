"""What a pool core is told: one input per ``PoolCore.step``.

Addresses (of requesters, workers, members) are opaque: the core stores them,
compares them for equality and hands them back in commands.  Requests and
results are read, never built: ``StageAsk`` says which attributes.  The timer
inputs (``DeadlineDue`` ...) are the core's own: a carrier arms them as its
runtime's wakeup payload and hands them back unchanged when they fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pegasus.config import Settings


class StageAsk(Protocol):
    """What the core reads of a stage request (actors.messages.StageRequest)."""

    @property
    def task_id(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def stage(self) -> str: ...
    @property
    def timeout_s(self) -> float | None: ...
    @property
    def context(self) -> Any: ...  # read only under a rate budget (its tokens are estimated)
    @property
    def tier(self) -> str | None: ...  # its task's model tier (None: its stage's), read by a rate budget
    @property
    def priority(self) -> int: ...  # its task's (lower first, as admission): the pool's order (pegasus.pool.order)
    @property
    def journal_to(self) -> Any: ...  # set: an effectful tool step (journalled before it runs), never prefetched


class PoolSpec(Protocol):
    """What the core reads of its configuration (actors.messages.PoolConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def queue_limit(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def prefetch(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Configured:
    """The pool's configuration, and ``me``: the name of the admin it runs on (its local workers' member)."""

    config: PoolSpec
    me: str


@dataclass(frozen=True, slots=True)
class Requested:
    request: StageAsk
    requester: Any


@dataclass(frozen=True, slots=True)
class Finished:
    """A worker is done with ``job``: ``result`` when it did not answer the requester itself;
    ``worker`` then carries what the pool accounts for (usage, a 429's retry_after_s)."""

    job: int
    result: Any = None
    worker: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Created:
    """The runtime created the worker a StartWorker asked for, at ``address``."""

    index: int
    address: Any


@dataclass(frozen=True, slots=True)
class Reported:
    """A worker reported ready (its process id and host); ``address`` is who said so."""

    index: int
    pid: int
    host: str
    address: Any


@dataclass(frozen=True, slots=True)
class Exited:
    """The worker at ``address`` is gone (its process died, or its member's admin says so)."""

    address: Any


@dataclass(frozen=True, slots=True)
class MemberChanged:
    """A convention member joined (``added``) or left; its admin's address and capabilities."""

    added: bool
    address: Any
    capabilities: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class HeldAsked:
    """The worker at ``address``, past a long call, asks whether it may begin job ``job``, handed to it held
    (prefetched): the pool may have moved it to a worker that freed meanwhile."""

    job: int
    address: Any


@dataclass(frozen=True, slots=True)
class Canceled:
    task_id: str


@dataclass(frozen=True, slots=True)
class StatsAsked:
    ask_id: int
    requester: Any


@dataclass(frozen=True, slots=True)
class Closing:
    """The pool is told to exit: end every worker, replace none."""


@dataclass(frozen=True, slots=True)
class Looked:
    """What the carrier read of the processes an Inspect named: pid -> /proc state letter (None: unreadable)."""

    states: dict[int, str | None]


# -- timers: one pending at a time per kind, except per-request or per-worker ones -------------


@dataclass(frozen=True, slots=True)
class DeadlineDue:
    """The earliest running job's deadline may have passed.

    One pending at a time, not one per job: Thespian sorts its pending wakeups on every
    ``wakeupAfter``, so a timer per job costs CPU that grows with the queue (docs/performance.md).
    """


@dataclass(frozen=True, slots=True)
class StarveDue:
    """Queued request ``seq`` has waited its stage timeout while the pool had no worker at all."""

    seq: int


@dataclass(frozen=True, slots=True)
class BudgetDue:
    """The model's rate budget may admit the next call now."""


@dataclass(frozen=True, slots=True)
class MoveDue:
    """A request held by a busy worker may be moved to an idle one now (its holder's call ran long enough)."""


@dataclass(frozen=True, slots=True)
class HealthDue:
    """Time to look whether a busy local worker's process is stopped (hung)."""


@dataclass(frozen=True, slots=True)
class PlacementDue:
    """The worker placed in slot ``index`` (``serial``) on a member must have reported by now."""

    index: int
    serial: int


@dataclass(frozen=True, slots=True)
class PingDue:
    """Time to ping the idle workers on members (pegasus/pool/contact.py)."""


@dataclass(frozen=True, slots=True)
class Pong:
    """The worker at ``address`` answered the ping sent at ``sent_at`` (the pool's clock)."""

    address: Any
    sent_at: float


@dataclass(frozen=True, slots=True)
class RespawnDue:
    """Slot ``index``'s worker died again and again: its back-off passed, start one on ``member`` now."""

    index: int
    member: str


PoolInput = (Configured | Requested | Finished | Created | Reported | Exited | MemberChanged | Canceled
             | StatsAsked | Closing | Looked | DeadlineDue | StarveDue | BudgetDue | HealthDue | PlacementDue
             | PingDue | Pong | RespawnDue | HeldAsked | MoveDue)
