"""The harness's reads of a system: every task of a run, however many (``ListTasks`` caps a page at 10,000:
``scale``'s 10,000 tasks once asked for 10,010 and lost every figure of its run), and every worker up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from benchmarks import common
from benchmarks.common import every_task, next_pause, pegasus_system, state_dir, wait_counts, wait_workers
from tests.support.clock import FakeTime

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOLD_A_SYSTEM = """
import time
from benchmarks.common import pegasus_system, state_dir, wait_workers
with state_dir() as state, pegasus_system(state) as system:
    wait_workers(system.client, timeout=120)  # the process tree complete: every process of it is checked
    print(state, *system.pids(), flush=True)
    time.sleep(600)
"""


def test_every_task_reads_page_after_page() -> None:
    with state_dir() as state, pegasus_system(state) as system:
        ids = [task["task_id"] for task in system.client.submit_many([f"what is {i} + 1?" for i in range(5)])]
        rows = every_task(system.client, page=2)
    assert sorted(row["task_id"] for row in rows) == sorted(ids)


class _Stats:
    """``stats`` answers in turn: the llm pool too busy to answer (no workers shown), then every worker up."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = [
            {"pools": {"llm": {"responsive": False}, "tool": {"workers": [{"pid": 2}]}}},
            {"pools": {"llm": {"workers": [{"pid": 1}, {"pid": None}]}, "tool": {"workers": [{"pid": 2}]}}},
            {"pools": {"llm": {"workers": [{"pid": 1}, {"pid": 3}]}, "tool": {"workers": [{"pid": 2}]}}}]

    def stats(self) -> dict[str, Any]:
        return self.answers.pop(0)


def test_waiting_for_the_workers_outlasts_a_pool_that_did_not_answer_stats() -> None:
    """On a loaded machine a pool starting 100 workers misses ``stats``' 2 s: shown without its workers."""
    client = _Stats()
    wait_workers(client, timeout=60)  # type: ignore[arg-type]
    assert client.answers == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_benchmark_ended_by_a_signal_stops_its_system_and_removes_its_state(signum: int) -> None:
    """Killed with SIGTERM (a CI timeout, ``kill``) or SIGHUP (its terminal closed), a benchmark once left
    every process of its system running, holding its port and state directory."""
    paths = (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", ""))  # benchmarks and tests.support: not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    run = subprocess.Popen([sys.executable, "-c", HOLD_A_SYSTEM], cwd=PROJECT_ROOT, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    system: dict[int, int] = {}
    try:
        state, *pids = (run.stdout.readline() if run.stdout else "").split()
        if not pids:
            run.kill()  # before reading its stderr to the end: it would sleep on, holding it open
        assert pids, run.communicate(timeout=120)[1]
        system = procs.identities([int(pid) for pid in pids])
        run.send_signal(signum)
        _, err = run.communicate(timeout=300)  # its stderr read while it stops: a full pipe would block it
        assert run.returncode == 128 + signum, err
        alive = procs.identities(list(system))
        assert [pid for pid, started in alive.items() if system[pid] == started] == [], err
        assert not Path(state).exists(), (sorted(p.name for p in Path(state).rglob("*")), err)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        procs.kill_all(system, grace=0.5)


class _Run:
    """A system finishing 10 tasks a second after a warm-up task: ``stats`` as the harness reads it, counted."""

    def __init__(self, clock: FakeTime) -> None:
        self.clock, self.began, self.asked = clock, clock.now, 0

    def stats(self) -> dict[str, Any]:
        self.asked += 1
        return {"tasks": {"done": 1 + min(200, int(10 * (self.clock.now - self.began)))}, "pools": {}}


def test_waiting_for_a_run_asks_stats_a_few_times_not_every_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: a 20 s run was asked 80 times at 0.25 s; each ``stats`` is six messages through the supervisor and
    both pools (~2 ms of the supervisor at load 32), 21% of its CPU per task at 50 ms stages."""
    clock = FakeTime()
    monkeypatch.setattr(common, "time", clock)
    run = _Run(clock)
    assert wait_counts(run, 201, timeout=300, pause=0.25)["done"] == 201  # type: ignore[arg-type]
    assert run.asked <= 15
    assert clock.now - run.began <= 20.0 + 0.25 + 1e-9  # the end seen within one pause


def test_the_pause_is_half_the_time_left_at_the_rate_seen_within_its_bounds() -> None:
    assert next_pause(left=100, finished=0, elapsed_s=3.0, floor_s=0.25) == 0.25  # no rate yet
    assert next_pause(left=100, finished=50, elapsed_s=5.0, floor_s=0.25) == 5.0  # 10 s left: 5
    assert next_pause(left=2, finished=50, elapsed_s=5.0, floor_s=0.25) == 0.25
    assert next_pause(left=1000, finished=10, elapsed_s=5.0, floor_s=0.25) == 5.0  # the ceiling
