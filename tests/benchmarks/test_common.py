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
from benchmarks.common import every_task, pegasus_system, state_dir, wait_workers

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HOLD_A_SYSTEM = """
import time
from benchmarks.common import pegasus_system, state_dir
with state_dir() as state, pegasus_system(state) as system:
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
        assert pids, run.stderr.read() if run.stderr else ""
        system = procs.identities([int(pid) for pid in pids])
        run.send_signal(signum)
        assert run.wait(timeout=120) == 128 + signum
        alive = procs.identities(list(system))
        assert [pid for pid, started in alive.items() if system[pid] == started] == []
        assert not Path(state).exists()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        procs.kill_all(system, grace=0.5)
