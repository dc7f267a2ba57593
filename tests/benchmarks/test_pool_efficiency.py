"""The pool benchmark's efficiency: a post-task reflection run inside the window is llm work, not a worker idle."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.pool import efficiency, reflections_written

L_S = 0.05
TURN_S = 0.002  # a worker's finish -> its next start


def one_worker(count: int, reflection_after: set[int]) -> tuple[list[dict[str, Any]], list[float]]:
    """``count`` task stages back to back on one worker, a reflection of one stage's length run after each of
    ``reflection_after``; the stage records and when each reflection was written."""
    stages, written, now = [], [], 1_700_000_000.0
    for index in range(count):
        stages.append({"pid": 7, "started": now, "finished": now + L_S, "pool": "llm"})
        now += L_S + TURN_S
        if index in reflection_after:
            written.append(now + L_S)
            now += L_S + TURN_S
    return stages, written


def test_a_reflection_in_the_window_counts_as_a_stage_of_work() -> None:
    stages, written = one_worker(100, {30, 60})
    figures = efficiency(stages, 1, L_S * 1000, written)
    assert figures["window_reflections"] == 2
    busy_share = L_S / (L_S + TURN_S)  # the worker is never idle but for its turnaround
    assert figures["efficiency"] == pytest.approx(busy_share, abs=0.005)
    assert figures["stage_efficiency"] < figures["efficiency"] - 0.015  # the reflections' share, shown apart
    assert figures["mean_worker_idle_ms"] == pytest.approx(TURN_S * 1000, abs=0.1)  # (a turnaround more each)
    assert figures["mean_worker_gap_ms"] > figures["mean_worker_idle_ms"]


def test_reflections_outside_the_window_and_without_one_count_nothing() -> None:
    stages, written = one_worker(100, {2, 97})  # before the 10th and after the 90th percentile of starts
    assert efficiency(stages, 1, L_S * 1000, written)["window_reflections"] == 0
    assert efficiency(stages, 1, L_S * 1000)["efficiency"] == efficiency(stages, 1, L_S * 1000)["stage_efficiency"]


def test_only_reflections_that_ran_are_counted() -> None:
    rows = [None, {"status": "complete", "updated_at": "2026-11-26T21:00:00.500000+00:00"},
            {"status": "failed", "updated_at": "2026-11-26T21:00:01+00:00"},
            {"status": "running", "updated_at": "2026-11-26T21:00:02+00:00"}, {"status": "skipped", "updated_at": "x"}]
    assert reflections_written(rows) == [1795726800.5, 1795726801.0]
