"""The tool-step journal's vocabulary (no I/O): its statuses and what a step's end records.

A row per step, keyed by its idempotency key.  An effectful step is written ``started`` before its
worker runs the tool, so a step with no row provably never started; its end (``finished``, or
``interrupted``: outcome unknown) is written with the transition that applies it, inserted when
there was no ``started`` row (idempotent steps skip that round trip), so a finished step is never
run again.
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
