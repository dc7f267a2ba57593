"""Scenario 2, pool efficiency: measured llm-stage throughput against the bound N / L.

Every offline stage sleeps L in its worker, the llm pool has N workers, and enough tasks run at once that
llm requests always wait.  Throughput: the llm stages started between the 10th and 90th percentile of all
starts, over that window.  Efficiency = throughput / (N / L).  Post-task reflections run inside the window
count as llm work (a user's real work, run there by the pool's wait bound); the task stages' own share is
reported beside it (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from benchmarks.common import check, pegasus_system, percentile, reflections_written, state_dir, wait_counts

NAME = "pool"
SIZES = (1, 3, 8)
QUICK_SIZES = (1, 8)  # --quick: the two ends; the middle shows nothing more that the run is whole


def measure(n: int, latency_ms: float, tasks: int) -> dict[str, Any]:
    overrides = {"pools": {"llm_workers": n, "tool_workers": max(4, n)},
                 "runtime": {"max_active_tasks": 4 * n + 4}, "cognition": {"latency_ms": latency_ms}}
    with state_dir() as state, pegasus_system(state, overrides) as system:
        client = system.client
        ids = [task["task_id"] for task in client.submit_many([f"what is {i} + 1?" for i in range(tasks)])]
        counts = wait_counts(client, tasks, timeout=60 + tasks * 4 * latency_ms / 1000 / n * 3)
        llm = [s for task_id in ids for s in client.get(task_id)["stages"] if s.get("pool") == "llm"]
        reflected = reflections_written(client.history(task_id).get("post_reflection") for task_id in ids)
    return {"n": n, "latency_ms": latency_ms, "tasks": tasks, **efficiency(llm, n, latency_ms, reflected),
            "done": counts.get("done", 0)}


def efficiency(llm: list[dict[str, Any]], n: int, latency_ms: float,
               reflected: Iterable[float] = ()) -> dict[str, Any]:
    """Throughput of ``llm`` stage records, and of the reflections written (``reflected``: epoch s) in their
    window (10th-90th percentile of the stages' starts), against N / L; the task stages' alone beside it."""
    starts = sorted(s["started"] for s in llm)
    lo, hi = percentile(starts, 10), percentile(starts, 90)
    window = [s for s in llm if lo <= s["started"] < hi]
    reflections = sum(1 for written in reflected if lo <= written < hi)
    seconds = hi - lo if hi > lo else float("nan")
    bound = n / (latency_ms / 1000.0)
    busy = sum(s["finished"] - s["started"] for s in window) / len(window) if window else float("nan")
    gaps, count = _worker_gaps(llm, lo, hi)
    # A reflection runs in one of the gaps, for about a stage's service time: what is left is the workers' idle.
    idle = (gaps - reflections * busy) / count if count else float("nan")
    throughput, stage_throughput = (len(window) + reflections) / seconds, len(window) / seconds
    return {"llm_stages": len(llm), "window_s": round(hi - lo, 3), "window_stages": len(window),
            "window_reflections": reflections, "throughput_per_s": round(throughput, 3),
            "bound_per_s": round(bound, 3), "efficiency": round(throughput / bound, 4),
            "stage_throughput_per_s": round(stage_throughput, 3),
            "stage_efficiency": round(stage_throughput / bound, 4), "mean_stage_service_ms": round(busy * 1000, 3),
            "mean_worker_gap_ms": round(gaps / count * 1000, 3) if count else float("nan"),
            "mean_worker_idle_ms": round(idle * 1000, 3)}


def _worker_gaps(stages: list[dict[str, Any]], lo: float, hi: float) -> tuple[float, int]:
    """Total and count of a worker's times between two of its stages in the window (its turnaround, and any
    reflection it ran between them)."""
    by_worker: dict[Any, list[dict[str, Any]]] = {}
    for s in stages:
        if lo <= s["started"] < hi:
            by_worker.setdefault(s.get("pid"), []).append(s)
    gaps = []
    for runs in by_worker.values():
        runs.sort(key=lambda s: s["started"])
        gaps += [b["started"] - a["finished"] for a, b in pairwise(runs)]
    return sum(gaps), len(gaps)


def run(quick: bool) -> dict[str, Any]:
    latency_ms = 20.0 if quick else 50.0
    figures: dict[str, Any] = {"latency_ms": latency_ms, "runs": []}
    checks = []
    for n in QUICK_SIZES if quick else SIZES:
        tasks = 4 * n + 4 if quick else 40 * n + 20
        result = measure(n, latency_ms, tasks)
        figures["runs"].append(result)
        checks.append(check(f"N={n}: efficiency (throughput / (N/L))", result["efficiency"], "x", ">= 0.95",
                            result["efficiency"] >= 0.95))
        checks.append(check(f"N={n}: llm stages/s, reflections included (bound {result['bound_per_s']:g})",
                            result["throughput_per_s"], "/s"))
        checks.append(check(f"N={n}: task stages' share of the bound", result["stage_efficiency"], "x"))
        checks.append(check(f"N={n}: reflections run in the window", result["window_reflections"], ""))
        checks.append(check(f"N={n}: stage service time (L={latency_ms:g})", result["mean_stage_service_ms"], "ms"))
        checks.append(check(f"N={n}: worker idle between stages", result["mean_worker_idle_ms"], "ms"))
        checks.append(check(f"N={n}: worker finish -> next stage start", result["mean_worker_gap_ms"], "ms"))
    note = (f"pool: L = {latency_ms:g} ms per stage (time.sleep in the worker); efficiency over the 10th-90th "
            "percentile window of llm stage starts, the post-task reflections written in it counted as llm stages "
            "(real work: the pool's wait bound runs them there); 'service time' is worker start->finish (L + "
            "processor); 'finish -> next stage start' is a worker's time between two task stages (a reflection "
            "it ran there included), 'idle between stages' the same less the reflections' service time (its "
            "result and WorkDone sent, then the next request: already in its mailbox with the llm pool's prefetch).")
    return {"figures": figures, "checks": checks, "notes": [note]}
