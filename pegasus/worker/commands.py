"""What a worker core asks its carrier to do, in order: the list ``WorkerCore.step`` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pegasus.bounds import timer_s
from pegasus.config import Settings
from pegasus.core_error import Log as Log  # a command of this core too (re-exported)
from pegasus.worker.inputs import HostCheckDue, ListingDue, OrphanDue, Outcome, StageAsk


@dataclass(frozen=True, slots=True)
class SetUp:
    """Configure logging from ``settings``, build the tools and processors stages need, title the
    process and log as ``pool`` worker ``index``; open the wake-up pipe if ``streams``.  Then tell the
    core what was built (``Loaded``) before anything else."""

    settings: Settings
    pool: str
    index: int
    streams: bool


@dataclass(frozen=True, slots=True)
class Ready:
    """Tell the pool at ``to`` that worker ``index`` runs as process ``pid`` on ``host``."""

    to: Any
    index: int
    pid: int
    host: str


@dataclass(frozen=True, slots=True)
class Journal:
    """Ask the journal at ``to`` to commit effectful step ``key`` as started (StepStarting); it answers
    ``Journalled``."""

    to: Any
    key: str
    task_id: str
    run: int
    step_index: int
    tool: str | None
    job: int


@dataclass(frozen=True, slots=True)
class AskBegin:
    """Ask the pool at ``pool`` whether held job ``job`` may begin (HeldStart); it answers ``BeginAnswered``."""

    pool: Any
    job: int


@dataclass(frozen=True, slots=True)
class Run:
    """Run ``request`` in this thread now, then tell the core (``Ran``) before anything else."""

    job: int
    request: StageAsk
    budget_s: float = 0.0  # its model calls end within this (pegasus.llm.deadline; 0: no deadline)


@dataclass(frozen=True, slots=True)
class Stream:
    """Run ``request`` (an llm stage) in a thread of its own, its text gathered for the loop, which the
    thread wakes; each wake-up is told to the core (``Heard``)."""

    job: int
    request: StageAsk
    budget_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Adopt:
    """Take what the pool knows of endpoints (pegasus.llm.ladder.adopt) before running anything more."""

    known: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True, slots=True)
class CloseStream:
    """Close the streamed stage's connection: its thread's read ends and it reports done."""


@dataclass(frozen=True, slots=True)
class Delta:
    """Send the requester at ``to`` piece ``seq`` of the text of model call ``call`` (TextDelta)."""

    to: Any
    request: StageAsk
    seq: int
    call: int
    text: str


@dataclass(frozen=True, slots=True)
class Refused:
    """A stage answered without running: the carrier makes it a failed result of its request."""

    error: str
    kind: str
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Answer:
    """Send the requester at ``to`` the outcome of ``request`` with ``worker`` as its worker record; tell the
    core ``AnswerLeft(job)`` once the answer has left this process (its ``Free`` waits for that)."""

    to: Any
    job: int
    request: StageAsk
    outcome: Outcome | Refused
    worker: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Return:
    """Send the pool at ``pool`` job ``job`` done with its outcome (``worker`` as its worker record): the
    pool decides what comes of it (a rate-limited call, a request without a requester)."""

    pool: Any
    job: int
    request: StageAsk
    outcome: Outcome | Refused
    worker: dict[str, Any]
    pooled: dict[str, Any] | None = None  # what the pool accounts for, kept out of the worker record (Free's)


@dataclass(frozen=True, slots=True)
class Free:
    """Tell the pool at ``pool`` that job ``job`` is over (answered, or answered by nobody);
    ``worker``: what the pool accounts for (the model usage)."""

    pool: Any
    job: int
    worker: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FindHost:
    """Find the machine's MCP host by its global name (a fresh one if it died), subscribe to its
    listings with ``settings``, then tell the core where it is (``HostFound``) before anything else."""

    settings: Settings


@dataclass(frozen=True, slots=True)
class CallHost:
    """Ask the MCP host at ``host`` to make call ``number`` (McpCall); it answers ``HostAnswered``."""

    host: Any
    number: int
    server: str
    tool: str
    arguments: dict[str, Any]
    key: str | None


@dataclass(frozen=True, slots=True)
class AskHeld:
    """Ask the MCP host at ``host`` which of calls ``numbers`` it holds (McpHeld); it answers ``HostHolds``."""

    host: Any
    numbers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShowListing:
    """Hand the host's listing to the tools (the machine-scope servers' phases, tools and errors)."""

    views: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Prepare:
    """Hand the tools the host's answer to ``server.tool(arguments)``: the stage run next reads it."""

    server: str
    tool: str
    arguments: dict[str, Any]
    ok: bool
    output: Any


@dataclass(frozen=True, slots=True)
class Pong:
    """Answer the pool at ``to``'s ping sent at ``sent_at``."""

    to: Any
    sent_at: float


@dataclass(frozen=True, slots=True)
class Arm:
    """Hand ``timer`` back to the core (``step(timer)``) in ``delay_s`` seconds."""

    delay_s: float
    timer: ListingDue | HostCheckDue | OrphanDue

    def __post_init__(self) -> None:  # a delay Thespian can arm whatever came before (pegasus.bounds)
        object.__setattr__(self, "delay_s", timer_s(self.delay_s))


@dataclass(frozen=True, slots=True)
class Exit:
    """End this worker (its pool is gone)."""



WorkerCommand = (SetUp | Ready | Journal | Run | Stream | CloseStream | Delta | Answer | Return | Free | FindHost
                 | CallHost | AskHeld | ShowListing | Prepare | Pong | Arm | Exit | Log | Adopt | AskBegin)
