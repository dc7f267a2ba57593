"""A task's trace, as ids anyone can compute, and the calls a stage made, kept for its worker to report.

The ids are derived, not stored: the trace id is that of the task's submitted ``traceparent``, else
a hash of its id; a run's span id a hash of the task and the run.  So ``status`` shows the trace id
before any span exists, and a worker parents its stage span without asking anyone.
``recording()`` and ``call(kind, name)`` keep a thread's calls.  Spans: ``actors/telemetry.py``.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

TRACEPARENT = "traceparent"  # the metadata key (and HTTP header) of a task's parent span
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TaskTrace:
    trace_id: str  # 32 hex digits
    parent_span_id: str | None  # 16 hex digits: the submit's span, when it came with a traceparent
    sampled: bool = True  # False: the submit's caller records none of this trace, so no span is sent (W3C, ParentBased)


def parse_traceparent(value: Any) -> tuple[str, str, bool] | None:
    """``(trace_id, span_id, sampled)`` of a W3C traceparent (version ff and all-zero ids refused), or None."""
    if not isinstance(value, str):
        return None
    found = _TRACEPARENT.match(value.strip().lower())
    if found is None or value.strip().lower().startswith("ff") or set(found[1]) == {"0"} or set(found[2]) == {"0"}:
        return None
    return found[1], found[2], bool(int(found[3], 16) & 1)  # the flags' lowest bit: sampled


def task_trace(task_id: str, metadata: Mapping[str, Any] | None) -> TaskTrace:
    """The trace of task ``task_id``: its submit's when it has a valid ``traceparent``, else its own."""
    parent = parse_traceparent((metadata or {}).get(TRACEPARENT))
    if parent is not None:
        return TaskTrace(*parent)
    return TaskTrace(_digest(f"pegasus-task:{task_id}", 32), None)


def run_span_id(task_id: str, run: int) -> str:
    """The span id of run ``run`` of the task (16 hex digits, never all zero)."""
    return _digest(f"pegasus-run:{task_id}:{run}", 16)


def child_traceparent(task_id: str, run: int, metadata: Mapping[str, Any] | None) -> str:
    """The ``traceparent`` a sub-task of run ``run`` of the task gets: its trace is the parent's, its runs'
    spans children of that run's span (a task tree is one trace), sampled as the parent is."""
    trace = task_trace(task_id, metadata)
    return f"00-{trace.trace_id}-{run_span_id(task_id, run)}-{'01' if trace.sampled else '00'}"


def _digest(text: str, digits: int) -> str:
    value = hashlib.sha256(text.encode()).hexdigest()[:digits]
    return value if set(value) != {"0"} else "1".rjust(digits, "0")


# -- the calls a stage made ------------------------------------------------------------------------------

@dataclass
class Call:
    """One model or tool call: what it was, when, and what it did (``attributes``: OpenTelemetry's names)."""

    kind: Literal["model", "tool"]
    name: str  # the model asked for, or the tool's name
    started_ns: int
    ended_ns: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # the exception's type name, when it raised


_CALLS: ContextVar[list[Call] | None] = ContextVar("pegasus_traced_calls", default=None)


@contextmanager
def recording() -> Iterator[list[Call]]:
    """Keep the calls this thread makes inside the block (``call``) in the list yielded."""
    calls: list[Call] = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


@contextmanager
def call(kind: Literal["model", "tool"], name: str) -> Iterator[dict[str, Any]]:
    """Time the block as one call; the caller adds what it learnt to the dict yielded.  Outside
    ``recording()`` nothing is kept.  An exception is noted (its type) and raised on."""
    calls = _CALLS.get()
    if calls is None:
        yield {}
        return
    made = Call(kind, name, time.time_ns())
    try:
        yield made.attributes
    except BaseException as exc:
        made.error = type(exc).__name__
        raise
    finally:
        made.ended_ns = time.time_ns()
        calls.append(made)
