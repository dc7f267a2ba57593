"""The one constant for each machine, state, stage and pool name.

They are ``StrEnum`` members: each is equal to its plain string (what the seeds,
the store and the messages carry), so a value read back from anywhere compares
equal to its constant.  Code names them through these classes, never by string.
Which stage a state runs, and on which pool, is declared by the machine tables
(``pegasus.task.machines``), not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class _Name(StrEnum):
    """A name that reads as its string: in messages (pydantic's errors), logs and test output."""

    def __repr__(self) -> str:
        return repr(self.value)


class MachineName(_Name):
    CLASSIC = "classic"  # seed 000
    REASON_ACT = "reason_act"  # seed 001
    LIFECYCLE = "lifecycle"  # seed 002: the supervisor's view of a task


CognitiveMachineName = Literal["classic", "reason_act"]
"""A machine a task actor runs, as the type of a field (a request's, the config's): plain
strings, so callers may pass either.  ``machines`` checks it against its cognitive machines."""


class CognitiveState(_Name):
    """States of the cognitive machines (classic and reason_act share those they have in common)."""

    IDLE = "idle"
    PERCEIVING = "perceiving"
    THINKING = "thinking"
    PLANNING = "planning"
    ACTING = "acting"
    REFLECTING = "reflecting"
    REASONING = "reasoning"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"


class LifecycleState(_Name):
    """States of seed 002's lifecycle (the supervisor's view of a task)."""

    DRAFT = "draft"
    APPROVED = "approved"
    QUEUED = "queued"
    RUNNING = "running"
    VERIFYING = "verifying"
    VERIFIED = "verified"
    DONE = "done"
    FAILED = "failed"
    CANCELED = "canceled"
    BLOCKED = "blocked"


class StageName(_Name):
    """What a stage request asks a worker to run."""

    PERCEIVE = "perceive"
    THINK = "think"
    PLAN = "plan"
    REFLECT = "reflect"
    REASON = "reason"
    ACT = "act"  # one tool step of the plan
    GATE = "gate"  # a verification gate (the supervisor's, on the tool pool; no machine state runs it)
    POST_REFLECT = "post_reflect"  # the post-task reflector (the supervisor's, on the llm pool, after done)
    EMBED_QUERY = "embed_query"  # a recall's query embedded (the supervisor's, on the llm pool)
    EMBED_ROWS = "embed_rows"  # memory rows without a vector embedded (the supervisor's background job)


class PoolName(_Name):
    LLM = "llm"  # model calls: the llm stages
    TOOL = "tool"  # tool steps and verification gates
    MEMORY = "memory"  # steps calling a memory.* tool: run by the supervisor, where the store is
