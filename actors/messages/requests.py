"""The conversation with clients: requests to the supervisor (and the guardian), and the Reply to each.

Requests are pydantic models: the supervisor validates each again on arrival
(``revalidate``), so a request built with wrong field types (by a buggy client,
bypassing the constructor) gets a clear error reply instead of corrupting a task.
Every number is bounded (a priority, a page, a cursor: within SQLite's integers), and
building one out of its bounds raises ``InvalidRequest`` naming the field: at the door,
before anything is sent; ``revalidate`` checks the same bounds again in the supervisor.
Transitions stream to subscribers as ``TransitionNotice`` (pegasus.admission), and a model's
reply as it is written as ``TextDelta`` (pegasus.streaming).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pegasus.admission import TransitionNotice as TransitionNotice  # noqa: F401 - what subscribers receive
from pegasus.streaming import TextDelta as TextDelta  # noqa: F401 - and, between transitions, streamed text
from pegasus.config import Settings
from pegasus.errors import InvalidRequest
from pegasus.idempotency import MAX_KEY_LENGTH
from pegasus.metadata import INT64_MAX
from pegasus.task.machines import COGNITIVE_MACHINES, MACHINES
from pegasus.task.names import CognitiveMachineName, MachineName


MAX_PRIORITY = 1_000_000  # a task's priority: 0 (first) to this
MAX_REASON = 4096  # characters of a suspend's or a cancel's reason


class Request(BaseModel):
    """Base of every client request; ``request_id`` comes back in the Reply."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    request_id: str = Field("", max_length=256)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # one clear error naming the field, not pydantic's page
            raise InvalidRequest(problems(exc), _first_field(exc)) from None

class Configure(Request):
    """Guardian -> supervisor, once: the settings the system runs with."""

    settings: Settings

class Submit(Request):
    text: str
    machine: CognitiveMachineName | None = None
    priority: int = Field(5, ge=0, le=MAX_PRIORITY)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = Field("cli", max_length=64)
    follow: bool = False  # subscribe the sender to this task before its first transition
    # Idempotency key: a key already used answers the task it created (pegasus.idempotency).
    key: str | None = Field(None, min_length=1, max_length=MAX_KEY_LENGTH)

MAX_BATCH = 1000  # tasks in one SubmitMany
MAX_PAGE = 10_000  # tasks on one page of ListTasks

class SubmitMany(Request):
    """Several tasks in one request: every one is created, or none is (the first bad one named)."""

    tasks: list[Submit] = Field(min_length=1, max_length=MAX_BATCH)

class Get(Request):
    task_id: str

# What ``ListTasks.state`` may name: a lifecycle state or a cognitive state of any machine.
LIST_STATES = tuple(dict.fromkeys(state for name in (MachineName.LIFECYCLE, *COGNITIVE_MACHINES)
                                  for state in MACHINES[name].states))

class ListTasks(Request):
    """A page of tasks, newest first (Reply data: tasks, total, offset, limit)."""

    state: str | None = None
    limit: int = Field(1000, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=INT64_MAX)
    before: int | None = Field(None, ge=1, le=INT64_MAX)  # only tasks older than the one of this seq (a cursor)

    @field_validator("state")
    @classmethod
    def _known_state(cls, state: str | None) -> str | None:
        if state is not None and state not in LIST_STATES:
            raise ValueError(f"unknown state {state!r}; the states are: {', '.join(LIST_STATES)}")
        return state

class History(Request):
    task_id: str

class Suspend(Request):
    task_id: str
    reason: str = Field("suspended by request", max_length=MAX_REASON)

class Resume(Request):
    task_id: str
    message: str | None = None

class Cancel(Request):
    task_id: str
    reason: str = Field("canceled by request", max_length=MAX_REASON)

class Approve(Request):
    task_id: str

class Retry(Request):
    task_id: str

class Subscribe(Request):
    """Stream TransitionNotice (and TextDelta) messages for one task (or all when task_id is None)."""

    task_id: str | None = None

class Unsubscribe(Request):
    """End one Subscribe of the sender's (the same task_id); its other subscriptions go on."""

    task_id: str | None = None

class Stats(Request):
    pass

class StoreStatus(Request):
    """The store's health alone (``/healthz``): answered at once, reads nothing, asks no pool."""

class Backup(Request):
    """Copy the database to ``path`` (absolute, on the supervisor's machine) with SQLite's backup API."""

    path: str = Field(min_length=1)
    overwrite: bool = False

class Locate(Request):
    """Client -> guardian: where is the supervisor?  Answered once it is up (Reply data: supervisor, generation)."""

def problems(exc: ValidationError) -> str:
    """A validation error on one line: ``field: what is wrong`` for each."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())


def _first_field(exc: ValidationError) -> str:
    errors = exc.errors()
    return ".".join(map(str, errors[0]["loc"])) if errors else ""


def revalidate(request: Request) -> Request:
    """Validate a received request again; ValueError with a clear text if malformed."""
    try:
        data = {name: getattr(request, name) for name in type(request).model_fields}
    except AttributeError as exc:  # built with model_construct and a field missing
        raise ValueError(f"malformed {type(request).__name__}: {exc}") from None
    try:
        return type(request)(**data)  # the constructor: its bounds, and InvalidRequest naming the field
    except InvalidRequest as exc:
        raise ValueError(f"malformed {type(request).__name__}: {exc}") from None

@dataclass(frozen=True)
class Reply:
    """The answer to every request: ``ok`` with ``data``, or an error with its kind."""

    request_id: str
    ok: bool
    data: Any = None
    error: str | None = None
    error_type: str | None = None
