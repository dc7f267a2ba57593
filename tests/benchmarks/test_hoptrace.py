"""``python -m benchmarks.hoptrace`` splits a hop on the code as it is: it wraps actor methods by name,
so a renamed one (``TaskActor._send_stage`` once) must fail here, not in someone's hands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.hoptrace import SEGMENTS, _segments

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_hoptrace_runs_and_prints_every_segment_of_the_hops() -> None:
    """Three classic tasks on a real system: every segment measured on each of their hops (6 a task: 5 of
    the run, and the post-task reflection its task actor hands out after the last)."""
    paths = (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", ""))  # benchmarks and tests.support: not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.hoptrace", "--tasks", "3"], check=False,
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = {line[:54].strip(): line[54:].split() for line in done.stdout.splitlines()}
    for label, *_ in SEGMENTS:
        assert label in rows, done.stdout
        assert int(rows[label][0]) == 18, done.stdout


def test_the_reflection_sharing_a_token_with_a_stage_is_not_taken_for_it(tmp_path: Path) -> None:
    """The supervisor asks the post-task reflection with its own token (1, like the run's first stage):
    marks are keyed by stage too, and a hop starts only at a result its task actor received."""
    marks = [  # time, token, stage, mark: perceive (1), a recall (tokens 2-3), think (4), then the reflection (1)
        (0.0, 1, "perceive", "T1"), (1.0, 1, "perceive", "P0"), (1.5, 1, "perceive", "P1"),
        (2.0, 1, "perceive", "W2"), (3.0, 1, "perceive", "W0"), (3.5, 1, "perceive", "W1"),
        (4.0, 1, "perceive", "T0"), (5.0, 4, "think", "T1"), (5.5, 1, "perceive", "T2"), (6.0, 4, "think", "P0"),
        (6.5, 4, "think", "P1"), (7.0, 4, "think", "W2"), (8.0, 4, "think", "W0"), (8.5, 4, "think", "W1"),
        (9.0, 4, "think", "T0"), (9.5, 4, "think", "T2"),
        (20.0, 1, "reflect", "P0"), (20.5, 1, "reflect", "P1"), (21.0, 1, "reflect", "W2"), (22.0, 1, "reflect", "W0")]
    (tmp_path / "1").write_text("".join(f"{100 + t} task {token} {stage} {name}\n" for t, token, stage, name in marks))
    segments = _segments(tmp_path, since=100.0)
    assert segments["hop (W0->W2)"] == [4.0]  # perceive's result -> think's Work; the reflection makes no hop
    assert segments["task actor: FSM, checkpoint, next request (T0->T1)"] == [1.0]
    assert segments["task actor sends its TaskReports (T1->T2)"] == [0.5]
