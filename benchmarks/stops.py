"""Scenario stops: how promptly a system stops, and answers for a stopped worker, with a tool step running.

Figures the tests once bounded (issue 30: a bound fails on a loaded machine while the code is right).
Stop: ``Client.close()`` while a tool worker is 0.5 s into ``sleep 30``.  Stopped worker: an effectful
step (``append_key``, holding 20 s) whose worker is SIGSTOPped just after its effect; the time until the
task is failed with the effect unknown (the pool's health check ends the worker).  docs/performance.md,
"What each scenario measures".
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any

from actors.runtime import procs
from benchmarks.common import check, pegasus_system, state_dir
from tests.support.tools import append_key_request, busy_tool_worker, keys_in

NAME = "stops"
DEFINITION = ("stop = Client.close() with a tool worker 0.5 s into a 30 s sleep step; stopped worker = SIGSTOP of "
              "the worker of an effectful step just after its effect, until its task is failed (effect unknown)")


def _wait(condition: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {timeout:g}s: {what}")
        time.sleep(0.02)
    return value


def _stop_once() -> float:
    with state_dir() as state, pegasus_system(state) as system:
        client = system.client
        task_id = client.submit("sleep 30")["task_id"]
        _wait(lambda: client.get(task_id)["state"] == "acting"
              and any(w["busy"] for w in client.stats()["pools"]["tool"].get("workers", ())), "the sleep step running")
        time.sleep(0.5)  # inside the step (a benchmark's scenario, not a test's wait)
        system.seen.update(procs.identities(system.pids()))
        began = time.monotonic()
        client.close()
        return time.monotonic() - began


def _stopped_worker_once() -> float:
    with state_dir() as state, pegasus_system(state) as system:
        client, keys = system.client, Path(state) / "keys.txt"
        task_id = client.submit(append_key_request(keys, 20))["task_id"]
        _wait(lambda: keys_in(keys), "the effect")
        pid = busy_tool_worker(client)["pid"]
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        try:
            final = client.wait(task_id, timeout=60)
            took = time.monotonic() - began
        finally:
            if procs.is_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if (final["lifecycle_state"], final["exit_reason"]) != ("failed", "unknown"):
            raise RuntimeError(f"the task ended {final['lifecycle_state']}/{final['exit_reason']}")
        return took


def run(quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else 5
    stops = [_stop_once() for _ in range(rounds)]
    stopped = [_stopped_worker_once() for _ in range(rounds)]
    stop_s, stopped_s = statistics.median(stops), statistics.median(stopped)
    checks = [check("stop with a worker busy in a 30 s tool step (median)", stop_s, "s", "< 6 (12.4 before)",
                    stop_s < 6.0),
              check("stopped worker's effectful step reported (median)", stopped_s, "s", "< 15 (30 before)",
                    stopped_s < 15.0)]
    figures = {"rounds": rounds, "stop_s": stops, "stopped_worker_s": stopped, "definition": DEFINITION}
    return {"figures": figures, "checks": checks, "notes": [DEFINITION]}
