"""The machine a run was made on: cores, memory, CPU model, Python, Thespian, date, git commit, and its speed.

A VM's speed drifts (on the 2-core VM of the README by up to 2x over minutes), so a
figure means little without the speed of the machine at that moment: ``speed`` times
a fixed pure-Python loop (the CPU-bound tool's) just before each scenario.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return float("nan")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


SPEED_ROUNDS = 200_000  # ~15-30 ms of the burn loop here


def burn_seconds(rounds: int, tries: int) -> float:
    """The best of ``tries`` timings of ``rounds`` of the CPU-bound tool's loop, in seconds."""
    from benchmarks.tools import burn_cpu

    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        burn_cpu(rounds)
        best = min(best, time.perf_counter() - began)
    return best


def speed(tries: int = 5) -> float:
    """Million rounds per second of the CPU-bound tool's loop, best of ``tries`` (higher is faster)."""
    return round(SPEED_ROUNDS / burn_seconds(SPEED_ROUNDS, tries) / 1e6, 2)


SCALING_ROUNDS = 600_000  # ~50-75 ms of the burn loop here


def _timed_burn(rounds: int, start: Any, times: Any) -> None:
    start.wait()
    times.put(burn_seconds(rounds, 1))


def _burn_at_once(processes: int, rounds: int) -> float:
    """Seconds until the last of ``processes`` forked processes, started together, ran ``rounds``."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    start, times = context.Barrier(processes), context.Queue()
    children = [context.Process(target=_timed_burn, args=(rounds, start, times)) for _ in range(processes)]
    for child in children:
        child.start()
    try:
        return max(times.get(timeout=60) for _ in children)
    finally:
        for child in children:
            child.join(10)
            if child.is_alive():  # pragma: no cover - only if a child hangs
                child.kill()
                child.join()


def parallel_scaling(processes: int | None = None, pairs: int = 3) -> float:
    """How many times the work of one process ``processes`` processes do in the same time (median of ``pairs``).

    Each pair times the burn loop in one process alone, then in ``processes`` at
    once (default: one per core).  On idle dedicated cores this is ~``processes``;
    on a VM whose vCPUs share a host it can be much less, and that, not any
    runtime, caps what ``processes`` workers can gain over one process.
    """
    processes = processes or os.cpu_count() or 1
    ratios = sorted(processes * _burn_at_once(1, SCALING_ROUNDS) / _burn_at_once(processes, SCALING_ROUNDS)
                    for _ in range(pairs))
    return round(ratios[len(ratios) // 2], 2)


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def describe() -> dict[str, Any]:
    try:
        thespian = metadata.version("thespian")
    except metadata.PackageNotFoundError:
        thespian = "unknown"
    return {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "cpu_model": _cpu_model(),
            "python": platform.python_version(), "thespian": thespian, "platform": platform.platform(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
            "load_average_start": load_average()}


def one_line(info: dict[str, Any]) -> str:
    return (f"{info['cores']} cores, {info['memory_gib']} GiB, {info['cpu_model']}, Python {info['python']}, "
            f"Thespian {info['thespian']}, commit {info['git_commit'][:10]}{'+dirty' if info['git_dirty'] else ''}, "
            f"{info['date']}, load {info['load_average_start']}")
