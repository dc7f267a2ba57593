"""What a pool core asks its carrier to do, in order: the list ``PoolCore.step`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pegasus.bounds import timer_s
from pegasus.config import Settings
from pegasus.core_error import Log as Log  # a command of this core too (re-exported)
from pegasus.pool.inputs import (
    BudgetDue, DeadlineDue, HealthDue, MoveDue, PingDue, PlacementDue, RespawnDue, StageAsk, StarveDue,
)


@dataclass(frozen=True, slots=True)
class SetUp:
    """Configure logging from ``settings``; log under pool ``pool`` from now on; load what the workers
    forked next will need (actors/runtime/sharing.py)."""

    settings: Settings
    pool: str


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Hand ``request`` to the worker at ``worker`` as pool job ``job``; it answers ``requester`` itself,
    within ``timeout_s`` (the pool's deadline for it), knowing what the pool knows of endpoints (``known``)."""

    worker: Any
    job: int
    request: StageAsk
    requester: Any
    timeout_s: float = 0.0
    known: tuple[tuple[str, dict[str, Any]], ...] = ()
    through_pool: bool = False  # the requester shares the pool's process: the worker answers in its WorkDone
    held: bool = False  # handed to a busy worker (prefetch)
    move_after_s: float = 0.0  # held: moved once the worker's call ran this long (0: never), so it asks past half


@dataclass(frozen=True, slots=True)
class AnswerHeld:
    """Tell the worker at ``worker`` whether it may begin held job ``job`` (``go``) or it was moved (not)."""

    worker: Any
    job: int
    go: bool


@dataclass(frozen=True, slots=True)
class Forward:
    """Send a worker's result (one that came through the pool) to its requester."""

    to: Any
    result: Any


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer ``request`` as failed: ``kind`` is a StageResult error_kind; ``worker`` what is known of the worker."""

    to: Any
    request: StageAsk
    error: str
    kind: str
    worker: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """Ask ``worker`` to stop ``job`` (a streamed llm stage closes its stream) and report it done."""

    worker: Any
    job: int


@dataclass(frozen=True, slots=True)
class StartWorker:
    """Create a worker (placed by ``requirements``; None: on the pool's own admin), send it its
    settings, then tell the core where it is (``Created``) before anything else."""

    pool: str
    index: int
    requirements: dict[str, str] | None
    settings: Settings


@dataclass(frozen=True, slots=True)
class EndWorker:
    """End the worker at ``address``: SIGKILL ``kill_pid`` first if it is this process's own child,
    then ask it to exit.  ``shutdown``: if the kill worked, tell the runtime it exited instead (it
    would otherwise wait for it)."""

    address: Any
    kill_pid: int | None = None
    shutdown: bool = False


@dataclass(frozen=True, slots=True)
class Ping:
    """Ask the worker at ``worker`` (on a member) to answer at once with ``sent_at``."""

    worker: Any
    sent_at: float


@dataclass(frozen=True, slots=True)
class Arm:
    """Hand ``timer`` back to the core (``step(timer)``) in ``delay_s`` seconds."""

    delay_s: float
    timer: DeadlineDue | StarveDue | BudgetDue | HealthDue | PlacementDue | PingDue | RespawnDue | MoveDue

    def __post_init__(self) -> None:  # a delay Thespian can arm whatever came before (pegasus.bounds)
        object.__setattr__(self, "delay_s", timer_s(self.delay_s))


@dataclass(frozen=True, slots=True)
class Inspect:
    """Read the process state of each pid (/proc) and tell the core at once (``Looked``)."""

    pids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Watch:
    """Be told (``on``) or stop being told when convention members join and leave."""

    on: bool


@dataclass(frozen=True, slots=True)
class SendStats:
    """Answer a stats ask: ``figures`` are the PoolStats fields after its ask_id."""

    to: Any
    ask_id: int
    figures: dict[str, Any]



PoolCommand = (SetUp | Dispatch | Forward | Fail | Stop | StartWorker | EndWorker | Arm | Inspect | Watch | SendStats
               | Log | Ping | AnswerHeld)
