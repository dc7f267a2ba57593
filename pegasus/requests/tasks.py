"""The requests about tasks and the system: submit, read, steer, subscribe, back up, locate.

Every number is bounded (a priority, a page, a cursor: within SQLite's integers).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from pegasus.config import Settings
from pegasus.idempotency import MAX_KEY_LENGTH
from pegasus.metadata import INT64_MAX
from pegasus.requests.base import Request, View, Views
from pegasus.task.names import CognitiveMachineName, CognitiveState, LifecycleState

MAX_PRIORITY = 1_000_000  # a task's priority: 0 (first) to this
MAX_REASON = 4096  # characters of a suspend's or a cancel's reason
MAX_META = 16  # metadata filters of one ListTasks


class Configure(Request[View]):
    """Guardian -> supervisor, once: the settings the system runs with."""

    settings: Settings

# A model tier a task runs every model stage on: "default" or a name of [llm.tiers]; which ones the system has
# is its supervisor's to check (pegasus.submission.check_tier: an unknown one is refused, naming them).
TierName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[\w.-]+$")]


class Submit(Request[View]):
    text: str
    machine: CognitiveMachineName | None = None
    tier: TierName | None = None  # None: each stage's tier ([llm.stages])
    priority: int = Field(5, ge=0, le=MAX_PRIORITY)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = Field("cli", max_length=64)
    follow: bool = False  # subscribe the sender to this task before its first transition
    # Idempotency key: a key already used answers the task it created (pegasus.idempotency).
    key: str | None = Field(None, min_length=1, max_length=MAX_KEY_LENGTH)

MAX_BATCH = 1000  # tasks in one SubmitMany
MAX_PAGE = 10_000  # tasks on one page of ListTasks

class SubmitMany(Request[Views]):
    """Several tasks in one request: every one is created, or none is (the first bad one named)."""

    tasks: list[Submit] = Field(min_length=1, max_length=MAX_BATCH)

class Get(Request[View]):
    task_id: str

# What ``ListTasks.state`` may name: a lifecycle state or a cognitive state of any machine (from the names, not
# the machines' tables: a command line builds no machine; tests/pegasus/test_requests_lean.py checks they agree).
LIST_STATES = tuple(dict.fromkeys(str(state) for state in [*LifecycleState, *CognitiveState]))

class ListTasks(Request[View]):
    """A page of tasks, newest first (Reply data: tasks, total, offset, limit)."""

    state: str | None = None
    limit: int = Field(1000, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=INT64_MAX)
    before: int | None = Field(None, ge=1, le=INT64_MAX)  # only tasks older than the one of this seq (a cursor)
    text: str | None = Field(None, min_length=1, max_length=1000)  # every word in the input or the result
    metadata: dict[str, str] = Field(default_factory=dict, max_length=MAX_META)  # top-level metadata values, as text

    @field_validator("state")
    @classmethod
    def _known_state(cls, state: str | None) -> str | None:
        if state is not None and state not in LIST_STATES:
            raise ValueError(f"unknown state {state!r}; the states are: {', '.join(LIST_STATES)}")
        return state

class TaskLog(Request[View]):
    """A task's log: its transitions, stage errors, model step-downs and tool output, in order, after the
    transition ``after`` (pegasus.store.task_log; Reply data: entries, next, more, finished)."""

    task_id: str = Field(min_length=1, max_length=64)
    after: int = Field(0, ge=0, le=INT64_MAX)


class DeleteTask(Request[View]):
    """Delete a task and its sub-tasks, every one finished, in one transaction (pegasus.store.retention)."""

    task_id: str = Field(min_length=1, max_length=64)


class Purge(Request[View]):
    """Delete the finished task trees last changed more than ``older_than_days`` ago (``state``: only those
    whose root ended so), oldest first, ``limit`` trees at most (Reply data: deleted, count, skipped, more)."""

    older_than_days: float = Field(ge=0, le=36500)
    state: Literal["done", "failed", "canceled"] | None = None
    limit: int = Field(1000, ge=1, le=1000)


class History(Request[View]):
    task_id: str

class Suspend(Request[View]):
    task_id: str
    reason: str = Field("suspended by request", max_length=MAX_REASON)

class Resume(Request[View]):
    task_id: str
    message: str | None = None

class Cancel(Request[View]):
    task_id: str
    reason: str = Field("canceled by request", max_length=MAX_REASON)

class Approve(Request[View]):
    task_id: str

class Retry(Request[View]):
    task_id: str

class Subscribe(Request[View]):
    """Stream TransitionNotice (and TextDelta) messages for one task (or all when task_id is None)."""

    task_id: str | None = None

class Unsubscribe(Request[View]):
    """End one Subscribe of the sender's (the same task_id); its other subscriptions go on."""

    task_id: str | None = None

class Stats(Request[View]):
    pass

class StoreStatus(Request[View]):
    """The store's health alone (``/healthz``): answered at once, reads nothing, asks no pool."""

class Backup(Request[View]):
    """Copy the database to ``path`` (absolute, on the supervisor's machine) with SQLite's backup API."""

    path: str = Field(min_length=1)
    overwrite: bool = False

class Locate(Request[View]):
    """Client -> guardian: where is the supervisor?  Answered once it is up (Reply data: supervisor, generation)."""


class Tree(Request[View]):
    """The tree under ``task_id`` (Reply data: the task's node, its children nested)."""

    task_id: str


class TaskContextRequest(Request[View]):
    """What a task knows as of its last checkpoint: the plan, its steps' results, its reflections."""

    task_id: str = Field(min_length=1, max_length=64)


class SendMessage(Request[View]):
    """Add ``text`` to the task's conversation (Reply data: the task's view, and ``message``: its number and
    how it reaches the task)."""

    task_id: str
    text: str = Field(min_length=1)
