"""Every message Pegasus actors exchange: frozen, module-level, picklable.

Client requests are pydantic models: the supervisor validates each again on
arrival (``revalidate``), so a request built with wrong field types (by a buggy
or hostile client, bypassing the constructor) gets a clear error reply instead
of corrupting a task.  Messages between Pegasus's own actors are frozen
dataclasses: cheap to pickle, and built only by code in this package.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Defined with the lifecycle logic (pure); the supervisor streams it to clients as it is.
from pegasus.config import Gate, Settings
from pegasus.admission import TransitionNotice as TransitionNotice  # noqa: F401 - re-exported
from pegasus.idempotency import MAX_KEY_LENGTH
from pegasus.store.journal import StepEnd

SUPERVISOR_NAME = "pegasus-supervisor"

# -- client requests ----------------------------------------------------------------


class Request(BaseModel):
    """Base of every client request; ``request_id`` comes back in the Reply."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    request_id: str = ""


class Configure(Request):
    """Guardian -> supervisor, once: the settings the system runs with."""

    settings: Settings


class Submit(Request):
    text: str
    machine: Literal["classic", "reason_act"] | None = None
    priority: int = Field(5, ge=0, le=1_000_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = "cli"
    follow: bool = False  # subscribe the sender to this task before its first transition
    # Idempotency key: a key already used answers the task it created (pegasus.idempotency).
    key: str | None = Field(None, min_length=1, max_length=MAX_KEY_LENGTH)


MAX_BATCH = 1000  # tasks in one SubmitMany


class SubmitMany(Request):
    """Several tasks in one request: every one is created, or none is (the first bad one named)."""

    tasks: list[Submit] = Field(min_length=1, max_length=MAX_BATCH)


class Get(Request):
    task_id: str


class ListTasks(Request):
    state: str | None = None
    limit: int = Field(1000, ge=1)


class History(Request):
    task_id: str


class Suspend(Request):
    task_id: str
    reason: str = "suspended by request"


class Resume(Request):
    task_id: str
    message: str | None = None


class Cancel(Request):
    task_id: str
    reason: str = "canceled by request"


class Approve(Request):
    task_id: str


class Retry(Request):
    task_id: str


class Subscribe(Request):
    """Stream TransitionNotice messages for one task (or all when task_id is None)."""

    task_id: str | None = None


class Unsubscribe(Request):
    pass


class Stats(Request):
    pass


class Backup(Request):
    """Copy the database to ``path`` (absolute, on the supervisor's machine) with SQLite's backup API."""

    path: str = Field(min_length=1)
    overwrite: bool = False


class Locate(Request):
    """Client -> guardian: where is the supervisor?  Answered once it is up (Reply data: supervisor, generation)."""


REQUEST_TYPES: tuple[type[Request], ...] = (
    Configure, Submit, Get, ListTasks, History, Suspend, Resume, Cancel, Approve, Retry,
    Subscribe, Unsubscribe, Stats, Backup,
)


def revalidate(request: Request) -> Request:
    """Validate a received request again; ValueError with a clear text if malformed."""
    try:
        data = {name: getattr(request, name) for name in type(request).model_fields}
    except AttributeError as exc:  # built with model_construct and a field missing
        raise ValueError(f"malformed {type(request).__name__}: {exc}") from None
    try:
        return type(request).model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"malformed {type(request).__name__}: {problems}") from None


@dataclass(frozen=True)
class Reply:
    """The answer to every request: ``ok`` with ``data``, or an error with its kind."""

    request_id: str
    ok: bool
    data: Any = None
    error: str | None = None
    error_type: str | None = None


class _Brief:
    """A short repr: Thespian formats every message it sends (``str(message)``) for a
    debug line it then filters out, and a full dataclass repr prints whole task
    contexts -- 13-20% of a pool's or task actor's CPU, measured (benchmarks/)."""

    def __repr__(self) -> str:
        fields = ("task_id", "job", "run", "token", "stage", "state", "to_state", "ok")
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in fields if hasattr(self, name))
        return f"{type(self).__name__}({shown})"


# -- supervisor <-> task actor ----------------------------------------------------------


@dataclass(frozen=True, repr=False)
class StartTask(_Brief):
    """Run (or continue) a task: its snapshot (TaskSnapshot) and what to apply first."""

    snapshot: Any
    run: int
    llm_pool: Any
    tool_pool: Any
    settings: Settings
    resume_event: str | None = None
    resume_payload: dict[str, Any] = field(default_factory=dict)
    generation: str = "1"
    journal: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class SuspendTask:
    task_id: str
    reason: str


@dataclass(frozen=True, repr=False)
class TaskTransitioned(_Brief):
    """Task actor -> supervisor: one cognitive transition (and the stage that caused it)."""

    task_id: str
    run: int
    from_state: str
    to_state: str
    event: str
    timestamp: str
    stage: dict[str, Any] | None = None
    checkpoint: tuple[str, bytes] | None = None
    journal_finish: StepEnd | None = None
    pid: int = 0


@dataclass(frozen=True, repr=False)
class TaskReports(_Brief):
    """Task actor -> supervisor: its reports since the last send, in order, in one message.

    ``reports`` holds TaskTransitioned and TaskStopped.  One
    message per batch instead of one per report: every Thespian message costs
    both processes about half a millisecond of CPU here (benchmarks/).
    """

    task_id: str
    run: int
    reports: tuple[Any, ...]


@dataclass(frozen=True, repr=False)
class TaskStopped(_Brief):
    """Task actor -> supervisor: the cognitive machine is suspended, completed or failed.

    The actor is free after sending this (the supervisor gives it another run or
    retires it); ``snapshot`` is everything needed to bring the task back.
    """

    task_id: str
    run: int
    state: str
    snapshot: Any
    exit_reason: str | None = None


# -- pools and workers ----------------------------------------------------------------------


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
    error_kind: Literal["timeout", "worker_died", "queue_full", "exception", "tool", "not_started", ""] = ""
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
    prefetch: int = 0  # requests a busy worker may hold besides the one it runs (llm pool only)


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
    less on every hop) and tells the pool only that it is free again.
    """

    job: int
    request: StageRequest
    reply_to: Any = None


@dataclass(frozen=True, repr=False)
class WorkDone(_Brief):
    """Worker -> pool: the job is over.  ``result`` is None when the worker already
    answered the requester; ``worker`` then carries what the pool accounts for
    (the model usage, for the llm pool's rate budget)."""

    job: int
    result: StageResult | None = None
    worker: dict[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class DeadlineCheck:
    """A pool's wakeup payload: end the jobs whose deadline has passed.

    One such wakeup is pending at a time (for the earliest deadline), not one
    per job: Thespian keeps pending wakeups in a list it sorts, with a
    Python-level comparison, on every ``wakeupAfter`` -- with a timer per job
    (thousands pending at a 120 s timeout) that sort was half of an llm pool's
    CPU in a 10,000-task run.
    """


@dataclass(frozen=True)
class RestartDue:
    """Wakeup payload of the guardian: start supervisor generation ``generation + 1`` now."""

    generation: int


@dataclass(frozen=True)
class RetryDue:
    """Wakeup payload of the supervisor: a retried task's backoff has passed."""

    task_id: str


@dataclass(frozen=True)
class StoreProbe:
    """Wakeup payload of the supervisor: try a write to learn whether the store takes writes again."""


# -- conventions (several machines) ----------------------------------------------------------


@dataclass(frozen=True)
class PlacementDeadline:
    """Wakeup payload of a pool: the worker placed in slot ``index`` (``serial``) must be ready by now."""

    index: int
    serial: int


@dataclass(frozen=True)
class CancelTask:
    """Supervisor -> pools: the task is canceled; drop its queued requests, end its running stage."""

    task_id: str


@dataclass(frozen=True)
class BudgetWakeup:
    """Wakeup payload of the llm pool: the model's rate budget may admit the next call now."""


@dataclass(frozen=True)
class HealthCheck:
    """Wakeup payload of a pool: look whether a busy local worker's process is stopped (hung)."""


@dataclass(frozen=True)
class QueueDeadline:
    """Wakeup payload of a pool: queued request ``seq`` waited its stage timeout with no worker to run it."""

    seq: int
