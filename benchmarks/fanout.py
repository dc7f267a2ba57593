"""Scenario fanout: sub-tasks (issue 20) -- one parent with many children, and a tree.

Offline processors.  ``wide``: one parent with 100 sub_task steps in parallel (``[subtasks] max_children``
raised to 100); ``tree``: depth 3, branching 4 (84 descendants, 21 of them parents that wait).  Time: the
root's submit to its ``done``; CPU per child: every process's CPU over the run / children; processes: the
peak (sampled every 0.2 s) against the idle system's, which must not grow with the waiting parents (a
waiting parent is a row in the store; only task actors, up to ``task_actors_max``, follow the load).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import (CpuAccount, MemorySampler, check, every_task, iso_seconds, pegasus_system, state_dir,
                               wait_counts)
from actors.runtime.system import system_pids
from pegasus.config import Settings

NAME = "fanout"
CAP = 32  # max_active_tasks
CEILING = Settings().runtime.task_actors_max  # what may start beside the idle system: task actors, no more


def wide_text(children: int) -> str:
    return "in parallel: " + "; ".join(f"echo child {n}" for n in range(children))


def tree_text(depth: int, branching: int, prefix: str = "n") -> str:
    """A parent at ``depth`` levels above its leaves, each of its parts a subtree in parentheses."""
    if depth == 1:
        return "in parallel: " + "; ".join(f"echo {prefix}.{n}" for n in range(branching))
    return "in parallel: " + "; ".join(f"({tree_text(depth - 1, branching, f'{prefix}.{n}')})"
                                       for n in range(branching))


def measure(label: str, text: str, tasks: int) -> dict[str, Any]:
    """Run one root task; ``tasks``: how many tasks the tree has in all (the root included)."""
    overrides = {"runtime": {"max_active_tasks": CAP}, "subtasks": {"max_children": 100, "max_depth": 3}}
    with state_dir() as state, pegasus_system(state, overrides) as system:
        client = system.client
        cpu = CpuAccount(system)  # waits for every worker: the idle process tree is complete
        idle = len(system_pids(system.spec))
        with MemorySampler(system, interval=0.2) as memory:
            start = time.time()
            root = client.submit(text)["task_id"]
            final = client.wait(root, timeout=300)
            wait_counts(client, tasks, timeout=60)
            spent = cpu.close(tasks - 1, not_client_s=memory.cpu_s)
        rows = every_task(client)
    done = sum(1 for row in rows if row["lifecycle_state"] == "done")
    return {"shape": label, "tasks": tasks, "children": tasks - 1, "done": done, "root": final["lifecycle_state"],
            "root_done_s": round(iso_seconds(final["updated_at"]) - start, 3), "idle_processes": idle,
            "peak_processes": memory.peak_processes, "peak_pss_mib": round(memory.peak_kib / 1024, 1), **spent}


def run(quick: bool) -> dict[str, Any]:
    shapes = [("wide", wide_text(8 if quick else 100), 9 if quick else 101),
              ("tree", tree_text(2, 2) if quick else tree_text(3, 4), 7 if quick else 85)]
    figures: dict[str, Any] = {"cap": CAP, "runs": []}
    checks = []
    for label, text, tasks in shapes:
        result = measure(label, text, tasks)
        figures["runs"].append(result)
        name = f"{label} ({result['children']} children)"
        checks.append(check(f"{name}: tasks done", result["done"], "tasks", f"= {tasks}", result["done"] == tasks))
        checks.append(check(f"{name}: submit -> root done", result["root_done_s"], "s"))
        checks.append(check(f"{name}: CPU per child, all processes", result["cpu_ms_per_task_total"], "ms"))
        ceiling = result["idle_processes"] + CEILING
        checks.append(check(f"{name}: peak processes (idle system: {result['idle_processes']})",
                            result["peak_processes"], "processes", f"<= idle + task-actor ceiling ({CEILING})",
                            result["peak_processes"] <= ceiling))
    return {"figures": figures, "checks": checks, "notes": [
        "fanout: offline processors; wide = one parent, one sub_task step per child; tree = depth 3, branching 4 "
        "(21 waiting parents). CPU per child = CPU of every system process and the client over the run / children. "
        "A waiting parent holds no slot, worker or process: the peak process count is the idle system's plus the "
        "task actors the load starts (up to [runtime] task_actors_max)."]}
