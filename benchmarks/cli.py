"""Scenario cli: how long one ``pegasus`` command takes, as a user's shell runs it (issue 31).

Each command is a whole process (``python -m actors.cli ...``: the interpreter's start, the imports,
the parse, connecting, asking, printing), run against a started system with one task in it; the
figures are medians of wall and CPU seconds (the CPU from the child's own rusage: what a loaded
machine does not inflate as much).  Before issue 31's lazy imports, 0.6-0.9 s on an idle machine.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import check, pegasus_system, state_dir

NAME = "cli"
DEFINITION = ("a whole `python -m actors.cli` process (start, imports, parse, ask, print) against a running "
              "system holding one task; median of N runs")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One whole run of ``argv``: (wall s, CPU s of the child)."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}: {child.stderr.read().decode()[-400:]}"
                           if child.stderr else f"{' '.join(argv)} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def run(quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else 11  # --quick: that each command runs and is timed, not a median
    checks, figures = [], {}
    # As an installed package runs: byte-compiled.  Under PYTHONDONTWRITEBYTECODE (set on the project's
    # machine) every run would compile the tree's sources again (~0.1 s of each command).
    root = Path(__file__).resolve().parents[1]
    for package in ("actors", "pegasus"):
        compileall.compile_dir(str(root / package), quiet=1)
    with state_dir() as state, pegasus_system(state) as system:
        task_id = system.client.submit("echo hi")["task_id"]
        env = {**os.environ, "PEGASUS_HOME": str(state),
               "PEGASUS_SYSTEM__ADMIN_PORT": str(system.spec.admin_port),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                          os.environ.get("PYTHONPATH")]))}
        for name, words in (("--version", ["--version"]), ("status", ["status", task_id]), ("list", ["list"])):
            argv = [sys.executable, "-m", "actors.cli", *words]
            timed(argv, env)  # a warm-up: the page cache, the .pyc files
            runs = [timed(argv, env) for _ in range(rounds)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            figures[name] = {"wall_s": wall, "cpu_s": cpu}
            checks.append(check(f"pegasus {name}: whole process (median wall)", wall, "s", "< 0.3 (0.6-0.9 before)",
                                wall < 0.3))
            checks.append(check(f"pegasus {name}: whole process (median CPU)", cpu, "s"))
    return {"figures": figures, "checks": checks, "notes": [f"cli: {DEFINITION}"]}
