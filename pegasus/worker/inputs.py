"""What a worker core is told: one input per ``WorkerCore.step``.

Addresses (the pool, requesters, the journal, the MCP host) are opaque: the core
stores them, compares them and hands them back in commands.  Work, requests and
results are read, never built: the protocols below say which attributes.  The
timer inputs are the core's own: the carrier arms them as its runtime's wakeup
payload and hands them back unchanged when they fire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    def run(self) -> int: ...
    @property
    def step_index(self) -> int | None: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def journal_to(self) -> Any: ...  # the supervisor that journals an effectful step (None: not journalled)
    @property
    def context(self) -> Any: ...  # the TaskContext: its plan names a step's tool


class WorkAsk(Protocol):
    """What the core reads of one pool job (actors.messages.Work)."""

    @property
    def job(self) -> int: ...
    @property
    def request(self) -> StageAsk: ...
    @property
    def reply_to(self) -> Any: ...  # the requester (None: the answer goes through the pool)
    @property
    def timeout_s(self) -> float: ...  # the pool's deadline for it (0: none given)
    @property
    def known(self) -> tuple[tuple[str, dict[str, Any]], ...]: ...  # what the pool knows of endpoints
    @property
    def through_pool(self) -> bool: ...  # answer in the pool's WorkDone (the requester shares the pool's process)
    @property
    def held(self) -> bool: ...  # handed while another job of this worker's ran (prefetch)
    @property
    def move_after_s(self) -> float: ...  # held: its pool may move it once the call before it ran this long (0: never)


class Outcome(Protocol):
    """What the core reads of a stage's result (actors.messages.StageResult)."""

    @property
    def worker(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Configured:
    """The pool at ``pool`` made this worker slot ``index`` of pool ``name``, with ``settings``."""

    pool: Any
    name: str
    index: int
    settings: Settings


@dataclass(frozen=True, slots=True)
class Loaded:
    """The carrier built what stages need (SetUp): the machine-scope MCP servers, and the effect class
    of a tool by name as the tool registry says it (None: unknown)."""

    machine_servers: frozenset[str]
    effect_of: Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class Requested:
    """The pool at ``pool`` hands this worker ``work``."""

    work: WorkAsk
    pool: Any


@dataclass(frozen=True, slots=True)
class Journalled:
    """The journal's answer to a Journal command: run job ``job`` (``go``: its ``started`` row is
    committed) or not (why, and the row the key already has)."""

    key: str
    job: int
    go: bool
    reason: str = ""
    existing: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class BeginAnswered:
    """The pool's answer to an AskBegin: begin held job ``job`` (``go``), or drop it (moved, or its task canceled)."""

    job: int
    go: bool


@dataclass(frozen=True, slots=True)
class Ran:
    """The stage a Run command named ran: its result, and the CPU seconds of its own work."""

    job: int
    result: Outcome
    cpu_s: float


@dataclass(frozen=True, slots=True)
class AnswerLeft:
    """Job ``job``'s answer has left this process: written whole to its connection (the kernel's to deliver
    now, whatever becomes of this process), delivered, or failed for good.  Said once or more."""

    job: int


@dataclass(frozen=True, slots=True)
class Heard:
    """The streamed stage's thread woke the loop: the text taken since (seq, call, text), and whether
    it has ended (then its result, None if it has none, and its CPU seconds)."""

    pieces: tuple[tuple[int, int, str], ...]
    ended: bool = False
    result: Outcome | None = None
    cpu_s: float = 0.0


@dataclass(frozen=True, slots=True)
class StopAsked:
    """The pool at ``pool`` asks to stop job ``job`` (a canceled or overrun streamed stage)."""

    job: int
    pool: Any


@dataclass(frozen=True, slots=True)
class Pinged:
    """The pool at ``pool`` pinged at ``sent_at`` (its clock, handed back unread)."""

    pool: Any
    sent_at: float


@dataclass(frozen=True, slots=True)
class Listed:
    """The machine's MCP host listed its servers (name -> pegasus.tools.mcp_policy.ServerView)."""

    views: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class HostFound:
    """The MCP host a FindHost command found (or made again) is at ``address``."""

    address: Any


@dataclass(frozen=True, slots=True)
class HostAnswered:
    """The MCP host answered call ``call``: its output (``ok``) or its ToolError."""

    call: int
    ok: bool
    output: Any = None


@dataclass(frozen=True, slots=True)
class HostHolds:
    """The MCP host's answer to AskHeld: of the calls ``asked`` about, those it still holds."""

    asked: tuple[int, ...]
    held: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ChildExited:
    """A child of this worker (only ever the MCP host it made) is gone."""

    address: Any


@dataclass(frozen=True, slots=True)
class Closing:
    """The worker is told to exit."""


# -- timers: one pending at a time per kind ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListingDue:
    """The wait for the machine's first MCP listing is over: serve what was held for it."""


@dataclass(frozen=True, slots=True)
class HostCheckDue:
    """Time to ask the MCP host which of the waiting calls it still holds."""


@dataclass(frozen=True, slots=True)
class OrphanDue:
    """Time to look whether this worker's pool is gone (pegasus.pool.contact.PoolWatch)."""


WorkerInput = (Configured | Loaded | Requested | Journalled | Ran | AnswerLeft | Heard | StopAsked | Pinged | Listed
               | HostFound | HostAnswered | HostHolds | ChildExited | Closing | ListingDue | HostCheckDue | OrphanDue
               | BeginAnswered)
