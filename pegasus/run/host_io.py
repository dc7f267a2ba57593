"""What ``pegasus.run.host``'s core takes (inputs) and gives (commands): plain values, one carrier's table each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pegasus.run.commands import AskRecall, Log, Reflected, SendStage, TaskStopped, TaskTransitioned
from pegasus.run.core import EffectOf
from pegasus.run.inputs import Answered, MemoriesRecalled, Started, Streamed, SuspendAsked
from pegasus.streaming import TextDelta

Address = Any  # an actor address, opaque here


# -- inputs ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Start:
    """Run (or continue) run ``run`` of ``task`` here, beginning with ``started``; ``supervisor`` sent it,
    with its pools.  The run starts past every token this host issued (earlier answers stay stale)."""

    task_id: str
    task: Any  # its TaskSnapshot (None, or anything else: a run that cannot start, reported abandoned)
    run: int
    max_iterations: int
    started: Started
    supervisor: Address
    llm_pool: Address
    tool_pool: Address
    effect_of: EffectOf
    generation: str = "1"
    journal: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    inbox: tuple[tuple[int, str], ...] = ()
    recall_k: int = 0
    identity: str = ""
    reflections: int = 0  # post-task reflections this host may have out at once (``pegasus.run.reflections``)
    awaited: bool = False  # a sub-task: its parent waits for its end (never held for time)


@dataclass(frozen=True, slots=True)
class Messages:
    """Messages for run ``run`` of the task, (number, text) each; for a run not held, ignored."""

    task_id: str
    run: int
    inbox: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class Drop:
    """Forget run ``run`` of the task (canceled): whatever it has in flight is dropped when it answers."""

    task_id: str
    run: int


@dataclass(frozen=True, slots=True)
class PoolReplaced:
    """Pool ``name`` at ``dead`` was replaced by ``address`` (said by ``sender``: only the supervisor counts)."""

    name: str
    address: Address
    dead: Address
    sender: Address


@dataclass(frozen=True, slots=True)
class CarryingFailed:
    """Carrying out the last step's commands raised: that run cannot go on here."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unsent:
    """``reports`` (a ``Report``'s) could not be sent, or a message of ``runs``: those runs cannot go on, and restart
    from what was committed; the reports of the first still held here are dropped (nothing of theirs after a gap)."""

    reports: Reports
    reason: str
    runs: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Closing:
    """The process is exiting: what is held is sent."""


@dataclass(frozen=True, slots=True)
class Handled:
    """A message was handled; ``more_read``: another, already read, waits to be handled; ``now``: the
    carrier's monotonic clock (None: reports are never held for time, ``pegasus.run.report_batch``)."""

    more_read: bool = False
    now: float | None = None


@dataclass(frozen=True, slots=True)
class ReportsDue:
    """The timer a ``WakeAfter`` asked for fired (a ``Handled`` follows, as after any message)."""


@dataclass(frozen=True, slots=True)
class Delivered:
    """A ``Report`` sent earlier was delivered, or failed (``more_read`` and ``now`` as in ``Handled``)."""

    more_read: bool = False
    now: float | None = None


HostInput = (Start | Answered | MemoriesRecalled | Streamed | SuspendAsked | Messages | Drop | PoolReplaced
             | CarryingFailed | Unsent | Closing | Handled | Delivered | ReportsDue)


# -- commands -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AskPool:
    """Send ``stage`` to the pool at ``to``; an effectful step names ``journal_to`` (the supervisor),
    where its worker journals it as started before it runs the tool."""

    to: Address
    stage: SendStage
    journal_to: Address | None


@dataclass(frozen=True, slots=True)
class Tell:
    """Pass ``what`` on to ``to`` as it is (a recall request or streamed text, to the supervisor)."""

    to: Address
    what: AskRecall | TextDelta


@dataclass(frozen=True, slots=True)
class Report:
    """Reports to ``to``, in order, as one message: of one or more activations, of one or more tasks.
    The carrier answers ``Delivered`` once the message is delivered (or failed).  ``waited``: they were
    held for time (``pegasus.run.report_batch``): a batch already, which the supervisor commits at once."""

    to: Address
    reports: tuple[TaskTransitioned | TaskStopped | Reflected, ...]
    waited: bool = False


@dataclass(frozen=True, slots=True)
class Abandoned:
    """Tell ``to`` that run ``run`` cannot go on here (forgotten): it restarts it from its checkpoint."""

    to: Address
    task_id: str
    run: int
    reason: str


@dataclass(frozen=True, slots=True)
class WakeAfter:
    """Answer ``ReportsDue`` in ``seconds``: it bounds the wait of the reports held for time."""

    seconds: float


@dataclass(frozen=True, slots=True)
class LogLine:
    """A log line; ``run`` (task id, machine, run) when it is about one run."""

    line: Log
    run: tuple[str, str, int] | None = None


HostCommand = AskPool | Tell | Report | Abandoned | LogLine | WakeAfter
Reports = tuple[TaskTransitioned | TaskStopped | Reflected, ...]
