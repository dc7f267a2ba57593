"""Scenario 3, scale: thousands of submitted tasks through a cap of 32 active tasks.

Every task submitted (``Client.submit_many``, BATCH a request, as fast as the supervisor answers), then
``stats`` polled until all are done.  Throughput = tasks / (first submit -> the last task's ``done``).
Memory: the peak of the summed PSS of every process of the system, sampled every 2 s in a thread (its own
CPU reported apart).  CPU: ms per task by process role (``benchmarks.common.CpuAccount``) and how busy the
machine was; the supervisor's commits and report messages a task (load cannot move them), and with
``PEGASUS_BENCH_PYSPY=supervisor`` its busy samples by part and handler (``benchmarks.spyprof``).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from benchmarks import spyprof
from benchmarks.common import (ROLES, CpuAccount, MemorySampler, check, every_task, iso_seconds, pegasus_system, state_dir,
                               wait_counts)
from benchmarks.cpusplit import PYSPY

NAME = "scale"
CAP = 32
BATCH = 100  # tasks per submit request
ROLE_LABEL = "sup | task actors | llm | tool | workers | admin | client"  # ROLES, shortened for the table


def measure(tasks: int) -> dict[str, Any]:
    overrides = {"runtime": {"max_active_tasks": CAP}}
    with state_dir() as state, pegasus_system(state, overrides) as system:
        client = system.client
        with MemorySampler(system, interval=2.0) as memory:
            cpu = CpuAccount(system)
            spying = (spyprof.recording(cpu.supervisor, state / "sup.raw") if "supervisor" in PYSPY
                      else nullcontext(False))
            with spying as spied:  # py-spy's own CPU is its own process's
                start = time.time()
                for first in range(0, tasks, BATCH):
                    client.submit_many([f"what is {i} + 1?" for i in range(first, min(first + BATCH, tasks))])
                submitted = time.time()
                counts = wait_counts(client, tasks, timeout=120 + tasks * 0.5, pause=0.5)
                spent = cpu.close(tasks, not_client_s=memory.cpu_s)
            reports = client.stats()["reports"]  # TaskReports received and the commits of their groups, since the start
            rows = every_task(client)
        end = max(iso_seconds(row["updated_at"]) for row in rows)
        done = sum(1 for row in rows if row["lifecycle_state"] == "done")
        profile = {"supervisor_py_spy": spyprof.split(state / "sup.raw")} if spied else {}
    elapsed = end - start
    return {"tasks": tasks, "cap": CAP, "batch": BATCH, "done": done, "counts": counts, "elapsed_s": round(elapsed, 3),
            "tasks_per_s": round(tasks / elapsed, 3), "submit_s": round(submitted - start, 3),
            "submits_per_s": round(tasks / (submitted - start), 3),
            "peak_pss_mib": round(memory.peak_kib / 1024, 1), "peak_processes": memory.peak_processes,
            "memory_samples": memory.samples, "sampler_cpu_s": round(memory.cpu_s, 3),
            "supervisor_per_task": {"task_reports": round(reports["messages"] / tasks, 3),
                                    "commits": round(reports["commits"] / tasks, 3)}, **spent, **profile}


def run(quick: bool) -> dict[str, Any]:
    sizes = (40,) if quick else (2000, 10000)  # quick: above the cap, one submit; the harness, not the figures
    figures: dict[str, Any] = {"cap": CAP, "runs": []}
    checks = []
    for tasks in sizes:
        result = measure(tasks)
        figures["runs"].append(result)
        big = tasks >= 10000
        checks.append(check(f"{tasks} tasks: completed", result["done"], "tasks", f"= {tasks}", result["done"] == tasks))
        checks.append(check(f"{tasks} tasks: throughput", result["tasks_per_s"], "tasks/s",
                            ">= 50" if big else None, result["tasks_per_s"] >= 50 if big else None))
        checks.append(check(f"{tasks} tasks: peak total PSS ({result['peak_processes']} processes)",
                            result["peak_pss_mib"], "MiB", "<= 1024" if big else None,
                            result["peak_pss_mib"] <= 1024 if big else None))
        checks.append(check(f"{tasks} tasks: submit rate ({BATCH} per request)", result["submits_per_s"], "/s"))
        shares = " | ".join(f"{result['cpu_ms_per_task'][role]:g}" for role in ROLES)
        checks.append(check(f"{tasks} tasks: CPU/task, all processes (machine {result['machine_busy']:.0%} busy)",
                            result["cpu_ms_per_task_total"], "ms"))
        checks.append(check(f"{tasks} tasks: CPU/task: {ROLE_LABEL}", shares, "ms"))  # type: ignore[arg-type]
        per_task = result["supervisor_per_task"]
        checks.append(check(f"{tasks} tasks: the supervisor's TaskReports | commits a task",
                            f"{per_task['task_reports']:g} | {per_task['commits']:g}", ""))  # type: ignore[arg-type]
    return {"figures": figures, "checks": checks, "notes": [
        f"scale: tasks submitted {BATCH} per request (Client.submit_many), all at once; "
        "throughput = tasks / (first submit -> last task done); PSS summed over every system process, "
        "peak of samples taken every 2 s. CPU per task = CPU time of each role over the run / tasks "
        "(/proc/<pid>/stat; task actors = the supervisor's children other than the pools, live and reaped; client = the benchmark process, "
        "its submit loop and stats polling; the PSS sampler's own CPU is left out and in the JSON)."]}
