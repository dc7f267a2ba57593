"""Scenario 2, pool efficiency: measured llm-stage throughput against the bound N / L.

Every offline stage sleeps ``[cognition] latency_ms`` = L in its worker, the
llm pool has N workers, and enough tasks run at once (cap 4N + 4, tool pool
large enough never to be the bottleneck) that llm requests always wait in the
pool's queue.  The throughput is measured over the steady part of the run: the
llm stages that started between the 10th and the 90th percentile of all llm
stage starts, divided by that window's length.  Efficiency = throughput / (N / L).
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import check, pegasus_system, percentile, state_dir, wait_counts

NAME = "pool"
SIZES = (1, 3, 8)


def measure(n: int, latency_ms: float, tasks: int) -> dict[str, Any]:
    overrides = {"pools": {"llm_workers": n, "tool_workers": max(4, n)},
                 "runtime": {"max_active_tasks": 4 * n + 4}, "cognition": {"latency_ms": latency_ms}}
    with state_dir() as state, pegasus_system(state, overrides) as system:
        client = system.client
        ids = [task["task_id"] for task in client.submit_many([f"what is {i} + 1?" for i in range(tasks)])]
        counts = wait_counts(client, tasks, timeout=60 + tasks * 4 * latency_ms / 1000 / n * 3)
        llm = [s for task_id in ids for s in client.get(task_id)["stages"] if s.get("pool") == "llm"]
    return {"n": n, "latency_ms": latency_ms, "tasks": tasks, **efficiency(llm, n, latency_ms),
            "done": counts.get("done", 0)}


def efficiency(llm: list[dict[str, Any]], n: int, latency_ms: float) -> dict[str, Any]:
    """Throughput of ``llm`` stage records over their 10th-90th percentile window of starts, against N / L."""
    starts = sorted(s["started"] for s in llm)
    lo, hi = percentile(starts, 10), percentile(starts, 90)
    window = [s for s in llm if lo <= s["started"] < hi]
    throughput = len(window) / (hi - lo) if hi > lo else float("nan")
    bound = n / (latency_ms / 1000.0)
    busy = sum(s["finished"] - s["started"] for s in window) / len(window) if window else float("nan")
    gaps = _worker_gaps(llm, lo, hi)
    return {"llm_stages": len(llm), "window_s": round(hi - lo, 3), "window_stages": len(window),
            "throughput_per_s": round(throughput, 3), "bound_per_s": round(bound, 3),
            "efficiency": round(throughput / bound, 4), "mean_stage_service_ms": round(busy * 1000, 3),
            "mean_worker_gap_ms": round(gaps * 1000, 3)}


def _worker_gaps(stages: list[dict[str, Any]], lo: float, hi: float) -> float:
    """Mean idle time of a worker between two of its stages in the window (its turnaround)."""
    by_worker: dict[Any, list[dict[str, Any]]] = {}
    for s in stages:
        if lo <= s["started"] < hi:
            by_worker.setdefault(s.get("pid"), []).append(s)
    gaps = []
    for runs in by_worker.values():
        runs.sort(key=lambda s: s["started"])
        gaps += [b["started"] - a["finished"] for a, b in zip(runs, runs[1:])]
    return sum(gaps) / len(gaps) if gaps else float("nan")


def run(quick: bool) -> dict[str, Any]:
    latency_ms = 20.0 if quick else 50.0
    figures: dict[str, Any] = {"latency_ms": latency_ms, "runs": []}
    checks = []
    for n in SIZES:
        tasks = 4 * n + 4 if quick else 40 * n + 20
        result = measure(n, latency_ms, tasks)
        figures["runs"].append(result)
        checks.append(check(f"N={n}: efficiency (throughput / (N/L))", result["efficiency"], "x", ">= 0.95",
                            result["efficiency"] >= 0.95))
        checks.append(check(f"N={n}: llm stages/s (bound {result['bound_per_s']:g})", result["throughput_per_s"],
                            "/s"))
        checks.append(check(f"N={n}: stage service time (L={latency_ms:g})", result["mean_stage_service_ms"], "ms"))
        checks.append(check(f"N={n}: worker idle between stages", result["mean_worker_gap_ms"], "ms"))
    note = (f"pool: L = {latency_ms:g} ms per stage (time.sleep in the worker); efficiency over the 10th-90th "
            "percentile window of llm stage starts; 'service time' is worker start->finish (L + processor), "
            "'idle between stages' is a worker's finish -> its next start while requests wait (its result and WorkDone "
            "sent, then the next request: already in its mailbox with the llm pool's prefetch).")
    return {"figures": figures, "checks": checks, "notes": [note]}
