"""Scenario 6, against the baseline: the same workloads on Pegasus and on seed 003's asyncio design.

Two workloads, each run on both with the same limits (llm 3, tool 3, cap 32):

* I/O-bound: ``what is N + 1?`` tasks whose every stage waits L (Pegasus:
  ``[cognition] latency_ms``, a ``time.sleep`` in the worker; baseline:
  ``await asyncio.sleep``).
* CPU-bound: ``call burn {"rounds": R}`` tasks whose tool step does the same
  fixed pure-Python work (``benchmarks.tools.burn_cpu``, a plugin tool in
  Pegasus, the same tool through the same registry inline in the baseline),
  with no simulated latency.

Ratio = Pegasus tasks/s / baseline tasks/s, each from the first submit to the
last task's end.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import baseline
from benchmarks.common import PLUGINS, check, iso_seconds, pegasus_system, state_dir, wait_counts
from benchmarks.tools import burn_cpu

NAME = "baseline"
LIMITS = {"llm": 3, "tool": 3, "cap": 32}


def _pegasus(texts: list[str], latency_ms: float) -> dict[str, Any]:
    overrides = {"pools": {"llm_workers": LIMITS["llm"], "tool_workers": LIMITS["tool"]},
                 "runtime": {"max_active_tasks": LIMITS["cap"]}, "cognition": {"latency_ms": latency_ms}}
    with state_dir() as state, pegasus_system(state, overrides) as system:
        client = system.client
        client.wait(client.submit("what is 1 + 1?")["task_id"])  # warm-up: first connections, imports
        start = time.time()
        ids = [client.submit(text)["task_id"] for text in texts]
        counts = wait_counts(client, len(texts) + 1, timeout=300, pause=0.1)
        rows = {row["task_id"]: row for row in client.list(limit=len(texts) + 10)}
    end = max(iso_seconds(rows[task_id]["updated_at"]) for task_id in ids)
    done = sum(1 for task_id in ids if rows[task_id]["lifecycle_state"] == "done")
    return {"tasks": len(texts), "completed": done, "elapsed_s": end - start, "tasks_per_s": len(texts) / (end - start),
            "counts": counts}


def _baseline(texts: list[str], latency_ms: float) -> dict[str, Any]:
    return baseline.run_workload(texts, llm=LIMITS["llm"], tool=LIMITS["tool"], max_active=LIMITS["cap"],
                                 latency_s=latency_ms / 1000.0, settings={"tools": {"plugins": PLUGINS}})


def _rounds_for(target_ms: float) -> int:
    """Rounds of burn_cpu that take about target_ms on this machine (calibrated once, in this process)."""
    probe = 300_000
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        burn_cpu(probe)
        best = min(best, time.perf_counter() - began)
    return max(1000, int(target_ms / 1000.0 / (best / probe)))


def run(quick: bool) -> dict[str, Any]:
    io_tasks, cpu_tasks = (24, 16) if quick else (240, 100)
    latency_ms = 20.0 if quick else 50.0
    burn_ms = 20.0 if quick else 100.0
    rounds = _rounds_for(burn_ms)
    io_texts = [f"what is {i} + 1?" for i in range(io_tasks)]
    cpu_texts = [f'call burn {{"rounds": {rounds}}}' for _ in range(cpu_tasks)]
    figures: dict[str, Any] = {"limits": LIMITS, "io": {"latency_ms": latency_ms},
                               "cpu": {"rounds": rounds, "burn_ms_calibrated": burn_ms}}
    figures["io"]["baseline"] = _baseline(io_texts, latency_ms)
    figures["io"]["pegasus"] = _pegasus(io_texts, latency_ms)
    figures["cpu"]["baseline"] = _baseline(cpu_texts, 0.0)
    figures["cpu"]["pegasus"] = _pegasus(cpu_texts, 0.0)
    checks = []
    for kind, target in (("io", 0.9), ("cpu", 1.6)):
        peg, base = figures[kind]["pegasus"], figures[kind]["baseline"]
        ratio = peg["tasks_per_s"] / base["tasks_per_s"]
        figures[kind]["ratio"] = round(ratio, 3)
        label = f"I/O-bound (L={latency_ms:g} ms)" if kind == "io" else f"CPU-bound (~{burn_ms:g} ms tool step)"
        checks.append(check(f"{label}: Pegasus / baseline", ratio, "x", f">= {target}", ratio >= target))
        checks.append(check(f"{label}: tasks/s Pegasus | baseline",
                            f"{peg['tasks_per_s']:.2f} | {base['tasks_per_s']:.2f}", "tasks/s"))  # type: ignore[arg-type]
        ok = peg["completed"] == peg["tasks"] and base["completed"] == base["tasks"]
        checks.append(check(f"{label}: every task completed in both", int(ok), "bool", "= 1", ok))
    return {"figures": figures, "checks": checks, "notes": [
        "baseline: seed 003 in one asyncio process (Semaphore per pool, create_task per stage), same TaskFSM, "
        "run_stage, processors and tool registry; no persistence. Pegasus writes every transition to SQLite."]}
