"""The tool-step journal's vocabulary (no I/O): its statuses and what a step's end records.

A row per journalled step, keyed by its idempotency key (task, attempt,
iteration, step).  An effectful step's row is written ``started`` by the
supervisor when the worker about to run it asks (``StepStarting``), and the
worker runs the tool only after that commit: a step with no row provably never
started.  A step's end (``finished``, or ``interrupted`` when it started and its
outcome is unknown) is written with the transition that applies it, and is
inserted when there was no ``started`` row (idempotent steps skip the round
trip), so a finished step is never run again.
"""

from __future__ import annotations

from dataclasses import dataclass

STARTED, FINISHED, INTERRUPTED_STATUS = "started", "finished", "interrupted"
ENDED = (FINISHED, INTERRUPTED_STATUS)


@dataclass(frozen=True)
class StepEnd:
    """How a journalled step ended: ``result`` is the msgpack of its event (type and payload)."""

    key: str
    status: str  # FINISHED or INTERRUPTED_STATUS
    result: bytes
    step_index: int
    tool: str | None
    effect: str
