"""What a system's processes cost in memory, by role: RSS, PSS and USS from /proc/<pid>/smaps_rollup.

``pss_of(pids)`` reads them for any pids; ``system_memory(spec)`` for every process of a running system,
grouped by the role its title names (``pegasus: llm worker 3 [...]`` is an llm worker).  ``python -m
benchmarks.memory`` starts a system with the pools asked for, waits until every worker has reported and
prints what each role costs (``--help``); ``--running`` measures the system already running for
``$PEGASUS_HOME`` (a ``pegasus start``: launcher and watcher too).  What each says, and the figures: docs/memory.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from actors.runtime.system import SystemSpec, system_pids
from benchmarks.common import pegasus_system, role_of, state_dir, title_of, wait_counts, wait_workers

FIELDS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty")


def smaps(pid: int) -> dict[str, int] | None:
    """The KiB figures of /proc/<pid>/smaps_rollup (FIELDS, and ``Uss``); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    found: dict[str, int] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        if name in FIELDS:
            found[name] = int(rest.split()[0])
    if "Pss" not in found:
        return None  # a zombie has no mappings
    found["Uss"] = found.get("Private_Clean", 0) + found.get("Private_Dirty", 0)
    return found


def pss_of(pids: Iterable[int]) -> dict[str, Any]:
    """RSS, PSS and USS (KiB) of each live pid and their totals: ``{"processes": n, "pss_kib": ..,
    "rss_kib": .., "uss_kib": .., "by_pid": {pid: smaps(pid)}}`` (the gone ones left out)."""
    by_pid = {pid: figures for pid in pids if (figures := smaps(pid)) is not None}
    return {"processes": len(by_pid), **{f"{key.lower()}_kib": sum(f[key] for f in by_pid.values())
                                         for key in ("Pss", "Rss", "Uss")}, "by_pid": by_pid}


def system_memory(spec: SystemSpec, pids: Iterable[int] | None = None) -> dict[str, Any]:
    """Memory of every process of a running system (or of ``pids``), by role.

    ``{"processes", "pss_kib", "rss_kib", "uss_kib", "roles": {role: {"processes", "pss_kib", "rss_kib",
    "uss_kib", "pss_kib_each"}}}``: the totals, and per role its sums and the mean PSS of one process.
    """
    measured = pss_of(system_pids(spec) if pids is None else pids)
    roles: dict[str, dict[str, Any]] = {}
    for pid, figures in measured["by_pid"].items():
        role = roles.setdefault(role_of(title_of(pid)), {"processes": 0, "pss_kib": 0, "rss_kib": 0, "uss_kib": 0})
        role["processes"] += 1
        for key in ("Pss", "Rss", "Uss"):
            role[f"{key.lower()}_kib"] += figures[key]
    for role in roles.values():
        role["pss_kib_each"] = round(role["pss_kib"] / role["processes"], 1)
        role["uss_kib_each"] = round(role["uss_kib"] / role["processes"], 1)
        role["rss_kib_each"] = round(role["rss_kib"] / role["processes"], 1)
    return {key: measured[key] for key in ("processes", "pss_kib", "rss_kib", "uss_kib")} | {"roles": roles}


def measure(llm_workers: int, tool_workers: int, provider: str = "offline", settle_s: float = 1.0,
            tasks: int = 0) -> dict[str, Any]:
    """Start a system with these pools (``provider`` offline, or openai against tests/support/fake_openai.py),
    wait for every worker, run ``tasks`` tasks (classic offline; reason_act on the model server, one
    model call and its answer each), and measure it."""
    import time
    from contextlib import ExitStack


    with ExitStack() as stack:
        overrides: dict[str, Any] = {"pools": {"llm_workers": llm_workers, "tool_workers": tool_workers},
                                     "runtime": {"max_active_tasks": max(1, tasks)}}
        if provider == "openai":
            from tests.support.fake_openai import FakeOpenAI, completion

            server = stack.enter_context(FakeOpenAI(responder=lambda body: completion({"thought": "t", "answer": "42"})))
            overrides["llm"] = {"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": ""}
        state = stack.enter_context(state_dir("pegasus-memory-"))
        system = stack.enter_context(pegasus_system(state, overrides, timeout=120.0))
        wait_workers(system.client, timeout=120.0 + llm_workers + tool_workers)
        if tasks:
            machine = "reason_act" if provider == "openai" else None
            for first in range(0, tasks, 100):
                system.client.submit_many([f"what is {i} + 1?" for i in range(first, min(tasks, first + 100))],
                                          machine=machine)
            wait_counts(system.client, tasks, timeout=120.0 + tasks)
        time.sleep(settle_s)
        return {"llm_workers": llm_workers, "tool_workers": tool_workers, "provider": provider, "tasks": tasks,
                **system_memory(system.spec, system.pids())}


def _mib(kib: float) -> str:
    return f"{kib / 1024:.2f}"


def table(result: dict[str, Any]) -> str:
    rows = [("role", "n", "PSS each MiB", "USS each MiB", "RSS each MiB", "PSS total MiB")]
    for role, figures in sorted(result["roles"].items(), key=lambda item: -item[1]["pss_kib"]):
        rows.append((role, str(figures["processes"]), _mib(figures["pss_kib_each"]), _mib(figures["uss_kib_each"]),
                     _mib(figures["rss_kib_each"]), _mib(figures["pss_kib"])))
    rows.append(("all", str(result["processes"]), "", "", "", _mib(result["pss_kib"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
                     for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--llm", type=int, default=100, help="llm workers (default 100)")
    parser.add_argument("--tool", type=int, default=100, help="tool workers (default 100)")
    parser.add_argument("--provider", choices=("offline", "openai"), default="offline")
    parser.add_argument("--tasks", type=int, default=0, help="offline tasks to run first (default none)")
    parser.add_argument("--running", action="store_true",
                        help="measure the system already running for this state directory ($PEGASUS_HOME: a "
                             "`pegasus start`, with its launcher and watcher) instead of starting one")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    if args.running:
        from actors.runtime.spec import resolved, spec_for
        from pegasus.config import Settings

        result = system_memory(spec_for(resolved(Settings())))
        print("the running system of this state directory")
    else:
        result = measure(args.llm, args.tool, args.provider, tasks=args.tasks)
        print(f"{args.llm} llm + {args.tool} tool workers, provider {args.provider}, {args.tasks} tasks run first")
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
