"""Scenario ``cpu``: where the CPU goes (issue 33), per process kind, waiting and not, and idle.

The Pegasus side of ``baseline`` (llm 3, tool 3, cap 32) with no latency and with L = 50 ms, alternately, with
recall and the reflector off (the issue's workload) and at the defaults; each run's /proc CPU by process kind.
One more run per regime times the handlers per message type (``benchmarks/msgprof.py``).  Idle: a system
started as ``pegasus start`` starts one, its CPU-seconds a minute and each process's PSS by kind.
docs/performance.md, "Issue 33: where the CPU goes".
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from actors.runtime import procs
from actors.supervisor.stats import STATS_WAIT_S
from benchmarks import msgprof, spyprof
from benchmarks.common import (
    KINDS,
    CpuAccount,
    check,
    pegasus_system,
    pss_kib,
    role_of,
    state_dir,
    title_of,
    wait_counts,
    wait_workers,
    woken_and_ran,
)
from benchmarks.compare import LIMITS

NAME = "cpu"
OFF_ZERO, OFF_WAITING = "no latency, memory off", "waiting, memory off"
WAITING_MS = 50.0
# regime -> (latency ms, memory at its defaults), run in this order in each repetition: the workload first.
REGIMES = {OFF_ZERO: (0.0, False), OFF_WAITING: (WAITING_MS, False), "no latency": (0.0, True),
           "waiting": (WAITING_MS, True)}
TOP = 4  # message types per actor kind in the table (the JSON has them all)
# An idle process wakes only for what happens (issue 33): no periodic timer.  Before, the launcher looked
# every second (60 a minute), the supervisor every 2.5 s and the admin every 3 s.
IDLE_WAKEUPS_PER_MIN = 12
# PEGASUS_BENCH_CPROFILE="supervisor,task actors": those kinds' handlers also run under cProfile in the
# message runs (their handler times then include the profiler's); their top functions go in the JSON.
def _names(variable: str) -> tuple[str, ...]:
    """The comma-separated names in an environment variable."""
    return tuple(filter(None, (name.strip() for name in os.environ.get(variable, "").split(","))))


CPROFILE = frozenset(_names("PEGASUS_BENCH_CPROFILE"))
# PEGASUS_BENCH_PYSPY=1 (py-spy installed): the workload runs sample the supervisor's whole process, its busy
# samples split by part and handler into each run's JSON (benchmarks/spyprof.py); py-spy's own CPU is its own.
# Or the processes to sample by title, e.g. "task actor,llm worker,tool worker,llm pool": one of each (the first).
PYSPY = ("supervisor",) if _names("PEGASUS_BENCH_PYSPY") == ("1",) else _names("PEGASUS_BENCH_PYSPY")


# The workload: recall and the post-task reflector off, so that Pegasus does the work LangGraph and DBOS did.
MEMORY_OFF = {"reflector": False, "recall_k": 0}


def _overrides(latency_ms: float, memory: bool = True) -> dict[str, Any]:
    return {"pools": {"llm_workers": LIMITS["llm"], "tool_workers": LIMITS["tool"]},
            "runtime": {"max_active_tasks": LIMITS["cap"]}, "cognition": {"latency_ms": latency_ms},
            **({} if memory else {"memory": MEMORY_OFF})}


def workload(tasks: int, latency_ms: float, memory: bool = True) -> dict[str, Any]:
    """``tasks`` classic tasks at one latency (memory at its defaults, or off); CPU ms per task by process kind."""
    texts = [f"what is {i} + 1?" for i in range(tasks)]
    with state_dir() as state, pegasus_system(state, _overrides(latency_ms, memory)) as system:
        client = system.client
        client.wait(client.submit("what is 1 + 1?")["task_id"])  # warm-up: first connections, imports
        cpu = CpuAccount(system, kinds=True)
        with ExitStack() as spies:
            spied = [kind for kind, pid in _first_of_each(cpu, PYSPY).items()
                     if spies.enter_context(spyprof.recording(pid, state / f"{kind}.raw"))]
            start = time.monotonic()
            client.submit_many(texts)
            counts = wait_counts(client, tasks + 1, timeout=300, pause=0.25)
            elapsed = time.monotonic() - start
        spent = cpu.close(tasks)
        profile = {f"{kind.replace(' ', '_')}_py_spy": spyprof.split(state / f"{kind}.raw") for kind in spied}
    return {"tasks": tasks, "latency_ms": latency_ms, "memory": memory, "done": counts.get("done", 0) - 1,
            "counts": counts, "tasks_per_s": round(tasks / elapsed, 3), **spent, **profile}


def _first_of_each(cpu: CpuAccount, kinds: tuple[str, ...]) -> dict[str, int]:
    """The first live process of each kind named (its title's role: ``llm worker``; ``task actor``: the
    supervisor's child), for py-spy."""
    found: dict[str, int] = {}
    for st in sorted(procs.all_stats().values(), key=lambda st: st.pid):
        if st.pid in cpu.roles or st.ppid == cpu.supervisor:
            found.setdefault(role_of(title_of(st.pid)), st.pid)
    return {kind: found[kind] for kind in kinds if kind in found}


def message_kinds(tasks: int, latency_ms: float) -> dict[str, Any]:
    """One more run with every actor's handlers timed per message type: messages and handler CPU (ms) per task.

    Counted from the system's start to its stop (the warm-up task and the stop's messages
    included: they are divided among ``tasks + 1``); beside each kind's process CPU over the
    same span, so that "outside handlers" is what the process spent receiving and sending.
    """
    with tempfile.TemporaryDirectory(prefix="pegasus-msgprof-") as directory:
        texts = [f"what is {i} + 1?" for i in range(tasks)]
        with msgprof.profiling(Path(directory), CPROFILE), state_dir() as state, \
                pegasus_system(state, _overrides(latency_ms)) as system:
            client = system.client
            cpu = CpuAccount(system, kinds=True)  # before the warm-up task, which the handlers' sums count too
            client.wait(client.submit("what is 1 + 1?")["task_id"])
            client.submit_many(texts)
            wait_counts(client, tasks + 1, timeout=300, pause=0.25)
            spent = cpu.close(tasks + 1)
        rows = msgprof.read(Path(directory))
        functions = {kind: msgprof.top_functions(Path(directory), kind) for kind in sorted(CPROFILE)}
    per_task = tasks + 1
    kinds = {kind: {name: {"messages_per_task": round(count / per_task, 3),
                           "handler_ms_per_task": round(1000.0 * cpu_s / per_task, 3),
                           "handler_us_per_message": round(1e6 * cpu_s / count, 1)}
                    for name, (count, cpu_s) in sorted(by_name.items(), key=lambda kv: -kv[1][1])}
             for kind, by_name in rows.items()}
    process = spent["cpu_ms_per_task"]
    process_of = {"supervisor": process["supervisor"], "task actors": process["task actors"],
                  "pools": process["llm pool"] + process["tool pool"], "workers": process["workers"]}
    outside = {kind: round(ms - sum(row["handler_ms_per_task"] for row in kinds.get(kind, {}).values()), 2)
               for kind, ms in process_of.items()}
    return {"tasks": tasks, "latency_ms": latency_ms, "kinds": kinds, "process_cpu_ms_per_task": process,
            "outside_handlers_ms_per_task": outside, "cprofile": sorted(CPROFILE), "top_functions": functions}


def idle(window_s: float) -> dict[str, Any]:
    """CPU of a started, untouched system over ``window_s`` seconds, per kind and in all (CPU-s per minute),
    its wake-ups (a minute, per kind and of the busiest process), and the PSS of each of its processes at
    the window's end, per kind and in all (MiB)."""
    with state_dir() as state, pegasus_system(state, daemon=True) as system:  # as `pegasus start` starts it
        wait_workers(system.client)  # the idle process tree is complete
        time.sleep(STATS_WAIT_S + 1.0)  # and the timers of those stats asks have gone off (one wake-up each)
        cpu = CpuAccount(system, kinds=True, wait=False)
        processes = len(system.pids())
        # The task actors too: an idle system keeps one, the home host of the pools (docs/architecture.md).
        roles = {**cpu.roles, **dict.fromkeys(cpu.task_actors(), "task actors")}
        counts = {kind: list(roles.values()).count(kind) for kind in KINDS if kind in roles.values()}
        before = {pid: woken_and_ran(pid) for pid in roles}
        time.sleep(window_s)  # the measured window itself, not a wait for something
        after = {pid: woken_and_ran(pid) for pid in roles}
        spent = cpu.close(1)
        pss = {kind: 0.0 for kind in counts}
        for pid, kind in roles.items():
            pss[kind] += pss_kib(pid) / 1024.0
    per_kind = {kind: ms for kind, ms in spent["cpu_ms_per_task"].items() if kind != "client"}
    per_min = 60.0 / spent["wall_s"]
    scale = per_min / 1000.0  # ms over the window -> s per minute
    woke = {pid: after[pid][0] - before[pid][0] for pid in before}
    ran_ns = {pid: after[pid][1] - before[pid][1] for pid in before}
    busiest = max(woke, key=lambda pid: woke[pid])
    return {"window_s": spent["wall_s"], "processes": processes, "processes_by_kind": counts,
            "cpu_s_per_min": round(sum(per_kind.values()) * scale, 4),
            "cpu_s_per_min_by_kind": {kind: round(ms * scale, 4) for kind, ms in per_kind.items()},
            "cpu_s_per_min_exact": round(sum(ran_ns.values()) / 1e9 * per_min, 4),
            "wakeups_per_min": round(sum(woke.values()) * per_min, 1),
            "wakeups_per_min_by_kind": {kind: round(sum(n for pid, n in woke.items() if roles[pid] == kind) * per_min, 1)
                                        for kind in counts},
            "busiest": {"kind": roles[busiest], "wakeups_per_min": round(woke[busiest] * per_min, 1)},
            "pss_mib": round(sum(pss.values()), 1), "pss_mib_by_kind": {k: round(v, 1) for k, v in pss.items()}}


# --quick proves that every figure is there (tests/integration/test_benchmarks_quick.py), not what it is: 8 tasks a
# run, and an idle window of 6 s: the shortest in which a process on a 3 s timer still wakes twice, over the 12
# a minute allowed (IDLE_WAKEUPS_PER_MIN).
QUICK_TASKS, QUICK_IDLE_S = 8, 6.0


def run(quick: bool) -> dict[str, Any]:
    tasks = QUICK_TASKS if quick else 240
    reps = 1 if quick else 2
    runs: dict[str, list[dict[str, Any]]] = {regime: [] for regime in REGIMES}
    for _ in range(reps):
        for regime, (latency_ms, memory) in REGIMES.items():
            runs[regime].append(workload(tasks, latency_ms, memory))
    best = {regime: min(results, key=lambda r: r["cpu_ms_per_task_total"]) for regime, results in runs.items()}
    messages = {"no latency": message_kinds(tasks, 0.0), "waiting": message_kinds(tasks, WAITING_MS)}
    still = idle(QUICK_IDLE_S if quick else 60.0)
    figures = {"limits": LIMITS, "tasks": tasks, "repetitions": reps, "waiting_ms": WAITING_MS,
               "best": best, "runs": runs, "messages": messages, "idle": still}
    zero, waiting = best["no latency"], best["waiting"]
    label = f"(L=0 | L={WAITING_MS:g} ms)"
    checks = [check(f"{regime}: every task done", r["done"], "tasks", f"= {tasks}", r["done"] == tasks)
              for regime, r in best.items()]
    checks.append(check(f"tasks/s {label}", f"{zero['tasks_per_s']:.2f} | {waiting['tasks_per_s']:.2f}", "tasks/s"))  # type: ignore[arg-type]
    off_zero, off_waiting = best[OFF_ZERO]["cpu_ms_per_task_total"], best[OFF_WAITING]["cpu_ms_per_task_total"]
    checks.append(check(f"CPU/task, all processes, the issue's workload (recall and reflector off) {label}",
                        f"{off_zero:.2f} | {off_waiting:.2f}", "ms", "<= 13 | <= 13", off_zero <= 13 and off_waiting <= 13))  # type: ignore[arg-type]
    checks.append(check(f"CPU/task, all processes, memory at its defaults {label}",
                        f"{zero['cpu_ms_per_task_total']:.2f} | {waiting['cpu_ms_per_task_total']:.2f}", "ms"))  # type: ignore[arg-type]
    for kind in KINDS:
        both = f"{zero['cpu_ms_per_task'][kind]:.2f} | {waiting['cpu_ms_per_task'][kind]:.2f}"
        off = f"{best[OFF_ZERO]['cpu_ms_per_task'][kind]:.2f} | {best[OFF_WAITING]['cpu_ms_per_task'][kind]:.2f}"
        checks.append(check(f"CPU/task: {kind} {label}", both, "ms"))  # type: ignore[arg-type]
        checks.append(check(f"CPU/task: {kind}, memory off {label}", off, "ms"))  # type: ignore[arg-type]
    for kind in ("supervisor", "task actors", "pools", "workers"):
        zero_rows, waiting_rows = (messages[r]["kinds"].get(kind, {}) for r in ("no latency", "waiting"))
        for name in list(zero_rows)[:TOP]:
            other = waiting_rows.get(name, {"messages_per_task": 0, "handler_ms_per_task": 0})
            both = " | ".join(f"{row['messages_per_task']:g} x, {row['handler_ms_per_task']:.2f}"
                              for row in (zero_rows[name], other))
            checks.append(check(f"{kind} handler CPU/task: {name} (messages per task, ms) {label}", both, "ms"))  # type: ignore[arg-type]
        both = " | ".join(f"{messages[r]['outside_handlers_ms_per_task'][kind]:.2f}" for r in ("no latency", "waiting"))
        checks.append(check(f"{kind}: CPU/task outside handlers (receive, unpickle, send) {label}", both, "ms"))  # type: ignore[arg-type]
    checks.append(check(f"machine busy {label}", f"{zero['machine_busy']:.0%} | {waiting['machine_busy']:.0%}", ""))  # type: ignore[arg-type]
    kinds = ", ".join(f"{n} {kind}" for kind, n in still["processes_by_kind"].items())
    checks.append(check(f"idle: CPU of all {still['processes']} processes ({kinds}) over {still['window_s']:.0f} s",
                        still["cpu_s_per_min"], "CPU-s/min", "near 0 (<= 0.1)", still["cpu_s_per_min"] <= 0.1))
    checks.append(check("idle: CPU of all processes, exact (/proc schedstat)", still["cpu_s_per_min_exact"], "CPU-s/min"))
    woken = ", ".join(f"{kind} {n:g}" for kind, n in still["wakeups_per_min_by_kind"].items() if n) or "none woke"
    checks.append(check(f"idle: wake-ups a minute, all processes ({woken})", still["wakeups_per_min"], "/min"))
    checks.append(check(f"idle: wake-ups a minute, the busiest process ({still['busiest']['kind']})",
                        still["busiest"]["wakeups_per_min"], "/min", f"<= {IDLE_WAKEUPS_PER_MIN}",
                        still["busiest"]["wakeups_per_min"] <= IDLE_WAKEUPS_PER_MIN))
    checks.append(check(f"idle: PSS of all {still['processes']} processes", still["pss_mib"], "MiB", "<= 120",
                        still["pss_mib"] <= 120))
    for kind, mib in still["pss_mib_by_kind"].items():
        checks.append(check(f"idle: PSS of the {kind} ({still['processes_by_kind'][kind]} process(es))", mib, "MiB"))
    return {"figures": figures, "checks": checks, "notes": [
        (f"cpu: the Pegasus side of baseline (llm {LIMITS['llm']}, tool {LIMITS['tool']}, cap {LIMITS['cap']}), "
        f"{tasks} classic tasks in one submit_many, at L=0 and L={WAITING_MS:g} ms, alternately, {reps} time(s) each: "
        "the run with the lower total counts; first with recall and the post-task reflector off (the issue's "
        "workload: the work LangGraph and DBOS did, its 13 ms target), then with memory at its defaults. CPU per task = each process kind's CPU (/proc/<pid>/stat, 10 ms "
        "ticks) over the run / tasks; task actors = the supervisor's children that are not pools, live and reaped; "
        "client = the benchmark process (its submit and stats polling every 0.25 s, which the supervisor answers)."),
        ("cpu messages: one more run per regime with every actor's receiveMessage timed per message type "
         "(benchmarks/msgprof.py: thread CPU of the handler, sends included), from the warm-up task to the stop, "
         f"divided by {tasks} + 1 tasks; 'outside handlers' = that kind's /proc CPU over the run minus its handlers' sum."),
        ("cpu idle: a system started as `pegasus start` starts one (launcher and watcher too), every worker up, "
         "no task; CPU of every process over the window, per minute (10 ms ticks, which charge a short wake-up a whole "
         "tick on a quiet machine; 'exact' from /proc/<pid>/task/*/schedstat); wake-ups = voluntary context switches, "
         "all threads; then each process's PSS (/proc/<pid>/smaps_rollup), by kind from its title.")]}
