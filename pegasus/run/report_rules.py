"""Which of a task actor's reports may wait for a batch, and what they weigh in a message: a batch must stay under
``[system] max_frame_bytes``, since Thespian refuses a larger message whole, unsent (its reports would be lost)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pegasus.run.commands import Reflected, TaskStopped, TaskTransitioned
from pegasus.task.names import CognitiveState

FIELDS_BYTES = 1024  # a report's names, states, time and its stage's worker fields, pickled, with room to spare
HISTORY_BYTES = 256  # one entry of a snapshot's history, pickled (~175 bytes), with room to spare
FRAME_SPARE_BYTES = 8192  # a frame's room around a lone report: its sender's address, its message's fields
# The ends no one waits on at once: a suspended run's requester and a parent's children do.
_UNWAITED_ENDS = frozenset({CognitiveState.COMPLETED, CognitiveState.FAILED})


def unwaited_end(report: object) -> bool:
    """A run's end no one waits on at once: it may wait with the transitions, bounded by the timer."""
    return isinstance(report, TaskStopped) and report.state in _UNWAITED_ENDS and not report.children \
        and not report.awaited


def holdable(report: object) -> bool:
    return isinstance(report, TaskTransitioned) or unwaited_end(report)


def sizes(reports: Sequence[Any]) -> list[int]:
    """Each report's bytes: a transition's checkpoint and journal entry; an end as the full checkpoint made of its
    snapshot just before it (its context, without the history) and its history; anything else pickled (rare:
    an end with no full checkpoint before it, a reflection's answer)."""
    out: list[int] = []
    full: dict[str, int] = {}  # task -> the bytes of its full checkpoint among ``reports``
    for report in reports:
        if isinstance(report, TaskTransitioned):
            kind, data = report.checkpoint or ("", b"")
            if kind == "full":
                full[report.task_id] = len(data)
            journal = len(report.journal_finish.result) if report.journal_finish is not None else 0
            stage = len(pickle.dumps(report.stage, pickle.HIGHEST_PROTOCOL)) if report.stage else 0  # ~2 us: small
            out.append(FIELDS_BYTES + len(data) + journal + stage)
        elif isinstance(report, TaskStopped) and report.task_id in full:
            out.append(FIELDS_BYTES + full[report.task_id] + HISTORY_BYTES * len(report.snapshot.history))
        else:
            out.append(len(pickle.dumps(report, pickle.HIGHEST_PROTOCOL)))
    return out


def fitting(reports: list[Any], most: int) -> tuple[list[Any], list[int], str | None]:
    """``reports`` up to the first over ``most`` bytes (0: no limit), their sizes, and why the run cannot go on."""
    weights = sizes(reports)
    for at, size in enumerate(weights):
        if most and size > most:
            return reports[:at], weights[:at], (f"its {type(reports[at]).__name__} is about {size} bytes, more than "
                                                f"a message carries ([system] max_frame_bytes)")
    return reports, weights, None


def fitted(reflected: Reflected, most: int) -> tuple[Reflected, int]:
    """A reflection's answer and its size; one over ``most`` bytes (0: no limit) as a failed answer saying why."""
    size = sizes((reflected,))[0]
    if not most or size <= most:
        return reflected, size
    why = f"its answer is about {size} bytes, more than a message carries ([system] max_frame_bytes)"
    too_large = replace(reflected, ok=False, payload={}, error=why, error_kind="too_large")
    return too_large, sizes((too_large,))[0]


def run_of(report: Any) -> tuple[str, int] | None:
    """The (task, run) a report is of (a reflection's answer is of no run)."""
    return (report.task_id, report.run) if isinstance(report, (TaskTransitioned, TaskStopped)) else None


def runs_of(reports: Sequence[Any]) -> list[tuple[str, int]]:
    """The (task, run) pairs ``reports`` are of, in order."""
    return [pair for pair in dict.fromkeys(map(run_of, reports)) if pair is not None]
