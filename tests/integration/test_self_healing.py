"""Pools heal themselves and a system stops promptly (issue 15, section 3), on real processes.

A worker stopped with SIGSTOP is not dead: Thespian says nothing, and before,
the requests it held waited for the whole stage timeout while other workers
idled.  Each test that stops a worker ends that one pid itself (SIGKILL works
on a stopped process) in case the pool did not.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from actors import procs
from tests.support.tools import append_key_request, busy_tool_worker, keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP one worker of the test's own system; SIGKILL exactly that pid afterwards if it lives."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if procs.is_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_request_held_by_a_stopped_worker_runs_on_another_within_seconds(pegasus) -> None:
    """Regression: with a 60 s stage timeout, the held and the running request waited 60 s."""
    client = pegasus(pools={"llm_workers": 2, "llm_prefetch": 1, "llm_timeout_s": 60.0},
                     cognition={"latency_ms": 400})
    ids = [client.submit(f"what is {n} + 1?")["task_id"] for n in range(5)]
    holder = wait_for(lambda: next((w for w in client.stats()["pools"]["llm"]["workers"] if w["held"] == 1), None),
                      what="an llm worker holding a request")
    running, held = holder["tasks"]
    began = time.monotonic()
    with stopped(holder["pid"]):
        for task_id in (held, running):  # the held one never ran; the running one may run again (no effect)
            done = client.wait(task_id, timeout=20)
            assert done["lifecycle_state"] == "done", done
        elapsed = time.monotonic() - began
        assert not procs.is_alive(holder["pid"])  # the pool ended it
    assert elapsed < 10.0, f"{elapsed:.1f}s"
    assert all(client.wait(task_id, timeout=30)["lifecycle_state"] == "done" for task_id in ids)
    llm = client.stats()["pools"]["llm"]
    assert llm["replaced"] == 1 and llm["size"] == 2
    print(f"\nheld and running requests of a stopped worker done {elapsed:.1f}s after the SIGSTOP")


def test_a_stopped_worker_mid_effectful_step_is_reported_not_repeated(pegasus, tmp_path: Path) -> None:
    """Regression: the task waited the step's 30 s timeout.  The effect had happened: unknown, once."""
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN)
    task_id = client.submit(append_key_request(keys, 20))["task_id"]
    wait_for(lambda: keys_in(keys), what="the effect")
    began = time.monotonic()
    with stopped(busy_tool_worker(client)["pid"]):
        final = client.wait(task_id, timeout=20)
        elapsed = time.monotonic() - began
    assert (final["lifecycle_state"], final["exit_reason"]) == ("failed", "unknown")
    assert [e["key"] for e in final["effects_unknown"]] == [f"{task_id}/a1.0/i0/s0"]
    assert keys_in(keys) == [f"{task_id}/a1.0/i0/s0"]
    assert elapsed < 10.0, f"{elapsed:.1f}s"


def test_stop_with_a_worker_busy_in_a_long_tool_step_is_prompt_and_logs_no_error(pegasus, state_dir: Path) -> None:
    """Regression: stop took 12.4 s (the busy worker read its exit request only after its
    tool call) and logged `Cannot operate on a closed database`."""
    client = pegasus()
    task_id = client.submit("sleep 30")["task_id"]
    wait_for(lambda: client.get(task_id)["state"] == "acting"
             and any(w["busy"] for w in client.stats()["pools"]["tool"]["workers"]), what="the sleep to run")
    time.sleep(0.5)  # well inside the step
    began = time.monotonic()
    client.close()
    elapsed = time.monotonic() - began
    assert elapsed < 3.0, f"stop took {elapsed:.1f}s"
    logs = state_dir / "logs"
    errors = [line for line in (logs / "pegasus.jsonl").read_text().splitlines()
              if json.loads(line).get("level") in ("error", "critical")]
    assert errors == []
    thespian = logs / "thespian.log"
    assert [line for line in (thespian.read_text().splitlines() if thespian.exists() else []) if " ERR " in line] == []
    print(f"\nstop with a worker busy in a 30 s tool step: {elapsed:.2f}s")
