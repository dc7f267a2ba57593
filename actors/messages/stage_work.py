"""The conversation of stage work: task actors, the pools, their workers, and the journal of effectful steps."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Literal

from actors.messages.base import _Brief
from pegasus.config import Gate, Settings


class _Pickled(bytes):
    """A field's value as its sender pickled it (see ``_PickledOnce``)."""

    __slots__ = ()

class _PickledOnce:
    """A dataclass field that travels pickled once and is decoded only where it is read.

    A pool passes a StageRequest's task context on to a worker without reading it
    (unless a rate budget estimates its tokens).  As a plain field, Thespian
    unpickled the whole TaskContext in the pool and pickled it again for the
    worker on every stage (the pool's part, timed in a loop: 48 us; now 9 us).
    Now the requester's pickle is kept as bytes until someone reads the field.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return None  # the field's default
        value = instance.__dict__[self.slot]
        if type(value) is _Pickled:
            value = instance.__dict__[self.slot] = pickle.loads(value)
        return value

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.slot] = value

    def pickled(self, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` (an instance's ``__dict__``) with this field as bytes, pickled now if it is not yet."""
        value = state.get(self.slot)
        if value is not None and type(value) is not _Pickled:
            state = {**state, self.slot: _Pickled(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))}
        return state

# Why a stage failed (pegasus.run.core maps it to the task's exit_reason); "": it did not.  too_large: its request
# or its answer was larger than a frame ([system] max_frame_bytes).
ErrorKind = Literal["timeout", "worker_died", "queue_full", "exception", "tool", "not_started", "rate_limited",
                    "too_large", ""]

@dataclass(frozen=True, repr=False)
class StageRequest(_Brief):
    """Run one stage (or one verification gate) for a task, before the deadline.

    ``context`` (the TaskContext) travels as its requester pickled it and is
    decoded where it is read: in the worker, not in the pool that forwards it.
    """

    task_id: str
    token: int
    stage: str
    machine: str = ""
    context: Any = _PickledOnce()

    step_index: int | None = None
    gate: Gate | None = None
    timeout_s: float | None = None
    idempotency_key: str | None = None
    # An effectful tool step: the worker asks this supervisor (StepStarting) before it runs
    # the tool, and runs it only on a go.  None: the step is not journalled as started.
    journal_to: Any = None
    run: int = 0  # the task's run that asked (the supervisor refuses a step of a run that is over)
    texts: tuple[str, ...] = ()  # what an embed stage embeds (pegasus.cognitive.stages.EMBED_STAGES)
    tier: str | None = None  # the task's model tier (``submit --tier``), read by the llm pool's budget
    priority: int = 5  # its task's (lower first, as admission): the pool's order (pegasus.pool.order)
    pool: str = ""  # the pool asked: a home host runs both (pegasus.pool.home)

    def __getstate__(self) -> dict[str, Any]:
        return StageRequest.__dict__["context"].pickled(self.__dict__)

@dataclass(frozen=True, repr=False)
class StageResult(_Brief):
    """A stage's outcome: the event to apply (ok) or why it failed."""

    task_id: str
    token: int
    stage: str
    ok: bool
    event_type: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: ErrorKind = ""
    worker: dict[str, Any] = field(default_factory=dict)

@dataclass(frozen=True)
class StepStarting:
    """Worker -> supervisor: about to run an effectful tool step; journal it as started first."""

    key: str
    task_id: str
    run: int
    step_index: int
    tool: str | None
    job: int  # the worker's pool job: the answer names it

@dataclass(frozen=True)
class StepGo:
    """Supervisor -> worker: run the step (``go``: its ``started`` row is committed) or not.

    Not: its run is over (``existing`` None), or the key already has a row
    (``existing``): the step started before, maybe ran, and is never run again.
    """

    key: str
    job: int
    go: bool
    reason: str = ""
    existing: dict[str, Any] | None = None

@dataclass(frozen=True)
class PoolConfig:
    name: str
    size: int
    queue_limit: int
    timeout_s: float
    settings: Settings
    prefetch: int = 0  # requests a busy worker may hold besides the one it runs

@dataclass(frozen=True)
class WorkerInit:
    pool: str
    index: int
    settings: Settings

@dataclass(frozen=True)
class WorkerReady:
    index: int
    pid: int
    host: str

@dataclass(frozen=True, repr=False)
class Work(_Brief):
    """Pool -> worker: one request to run, tagged with the pool's job number.

    ``reply_to`` is the requester: the worker answers it directly (one send
    less on every hop) and tells the pool only that it is free again --
    unless ``through_pool``.
    """

    job: int
    request: StageRequest
    reply_to: Any = None
    timeout_s: float = 0.0  # the pool's deadline for it: the worker fits its model calls inside
    known: tuple[tuple[str, dict[str, Any]], ...] = ()  # what the pool's workers learnt of endpoints (ladder)
    # The requester shares the pool's process (a home host, pegasus.pool.home): the answer goes in the WorkDone,
    # one message; ``reply_to`` then only gets the streamed text.
    through_pool: bool = False
    # Handed to a busy worker (prefetch): the pool may move it to a worker that frees meanwhile once the worker's
    # call ran ``move_after_s`` (0: never), so after a call of half that the worker asks (HeldStart) first.
    held: bool = False
    move_after_s: float = 0.0

@dataclass(frozen=True, repr=False)
class WorkDone(_Brief):
    """Worker -> pool: the job is over.  ``result`` is None when the worker already
    answered the requester; ``worker`` then carries what the pool accounts for
    (the model usage, for the llm pool's rate budget)."""

    job: int
    result: StageResult | None = None
    worker: dict[str, Any] = field(default_factory=dict)

@dataclass(frozen=True)
class HeldStart:
    """Worker -> pool: after a long call, may it begin held job ``job``?  The pool may have moved it."""

    job: int

@dataclass(frozen=True)
class HeldGo:
    """Pool -> worker: begin held job ``job`` (``go``; the pool never moves it now), or drop it: it was moved
    to another worker, and this one's answer would be stale, or its task was canceled (the pool is done with it)."""

    job: int
    go: bool

@dataclass(frozen=True)
class PoolStatsRequest:
    ask_id: int

@dataclass(frozen=True)
class PoolStats:
    ask_id: int
    name: str
    size: int
    busy: int
    queued: int
    replaced: int
    workers: list[dict[str, Any]] = field(default_factory=list)
    # The convention members the pool knows: name, address, local (the admin the pool
    # runs on), workers (this pool's, on it), wanted (what it advertises for this pool),
    # capabilities (pegasus.*) and failed_placements.
    members: list[dict[str, Any]] = field(default_factory=list)
    # What is left of the llm pool's rate budget, per limited tier (LlmBudget.view); None: no limit.
    budget: dict[str, dict[str, Any]] | None = None
    # What the llm pool's workers learnt of each endpoint (pegasus.llm.ladder.ladder_view): model -> shape.
    ladder: dict[str, str] = field(default_factory=dict)
    # Model stages settled per tier and status (LlmBudget.counts); None: not the llm pool.
    model_requests: list[dict[str, Any]] | None = None

@dataclass(frozen=True)
class StopStage:
    """Pool -> worker: stop job ``job`` (a streamed llm stage closes its stream), answer nobody but
    the pool (WorkDone), and stay for the next.  A job the worker no longer runs is ignored."""

    job: int

@dataclass(frozen=True)
class CancelTask:
    """Supervisor -> pools: the task is canceled; drop its queued requests, end its running stage."""

    task_id: str
