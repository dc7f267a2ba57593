"""What every scenario shares: a real Pegasus system in a tmp dir, memory sampling, statistics.

``pegasus_system(overrides)`` starts a multiprocTCPBase system with
``actors.client.Client.start`` on a free 127.0.0.1 port (never 1900) with its
own temporary state directory, and always shuts it down -- on success, on an
exception, on Ctrl-C, on SIGTERM or SIGHUP -- then checks that every process it had is gone (and
SIGKILLs, by pid and start time, exactly those that are not).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from actors.runtime import procs
from actors.runtime.procs import free_port
from actors.client import Client
from actors.runtime.system import SystemSpec, shutdown, system_pids
from pegasus.config import Settings

TERMINAL = frozenset({"done", "failed", "canceled"})
PLUGINS = ["benchmarks.tools:register", "tests.support.tools:register"]




def settings_for(state_dir: Path, port: int, overrides: dict[str, Any] | None = None) -> Settings:
    # Everything else as a user gets it by default (logging at info: a JSON line per transition).
    base: dict[str, Any] = {"system": {"admin_port": port}, "state": {"home": str(state_dir)},
                            "tools": {"plugins": list(PLUGINS)}}
    for section, values in (overrides or {}).items():
        base.setdefault(section, {}).update(values)
    return Settings().with_overrides(base)


@contextlib.contextmanager
def state_dir(prefix: str = "pegasus-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class System:
    """A started system: its client, spec, settings and every pid seen so far."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.spec: SystemSpec = client.spec
        self.seen: dict[int, int] = procs.identities(system_pids(self.spec))

    def pids(self) -> list[int]:
        pids = system_pids(self.spec)
        self.seen.update(procs.identities(pids))
        return pids

    def stop(self) -> None:
        """Shut down; SIGKILL (by identity) whatever of ours survived; raise if anything still lives."""
        if self.client.closed:
            survivors = procs.kill_all(self.seen, grace=5.0)
        else:
            self.seen.update(procs.identities(system_pids(self.spec)))
            self.client.closed = True
            try:
                shutdown(self.spec, self.client.asys, grace=10.0)
            finally:
                survivors = procs.kill_all(self.seen, grace=0.5)
        if survivors:
            raise RuntimeError(f"processes {survivors} of port {self.spec.admin_port} survived shutdown")


@contextlib.contextmanager
def pegasus_system(state: Path, overrides: dict[str, Any] | None = None, *, port: int | None = None,
                   timeout: float = 60.0, daemon: bool = False) -> Iterator[System]:
    """A real Pegasus system on multiprocTCPBase; always shut down, every process checked gone.

    ``daemon``: started as ``pegasus start`` starts one, from a fresh launcher (with its watcher), so its
    processes hold none of what this process imported (the harness's httpx and rich, for one)."""
    settings = settings_for(state, port or free_port(), overrides)
    client = Client.start_daemon(settings, timeout=timeout)[0] if daemon else Client.start(settings, timeout=timeout)
    system = System(client)
    try:
        with _terminate_raises():
            yield system
    finally:
        system.stop()


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit here, so the ``finally`` above stops the system: by default they
    end the process at once and leave every actor process of the run behind."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def end(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, end) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:  # a second signal while the system stops ends the process as the caller had it
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# -- waiting --------------------------------------------------------------------------------------
def _poll_stats(client: Client, done: Callable[[dict[str, Any]], bool], timeout: float,
                pause: Callable[[dict[str, Any], float], float], what: str) -> dict[str, Any]:
    """Ask ``stats`` until ``done(stats)``; return those stats; between asks, ``pause(stats, seconds waited)``.
    TimeoutError (naming ``what``) after ``timeout``."""
    began = time.monotonic()
    deadline = began + timeout
    while True:
        stats = client.stats()
        if done(stats):
            return stats
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(f"after {timeout:g}s: {what} (last stats: tasks {stats['tasks']}, pools {stats['pools']})")
        time.sleep(min(pause(stats, now - began), deadline - now))


def wait_counts(client: Client, expected: int, timeout: float, pause: float = 0.25,
                states: frozenset[str] = TERMINAL) -> dict[str, int]:
    """Poll ``stats`` until ``expected`` tasks are in ``states``; return the counts.  Paced (``next_pause``): each
    ``stats`` costs the supervisor and both pools six messages, which a measured run must not be made of."""
    def reached(stats: dict[str, Any]) -> int:
        return sum(n for state, n in stats["tasks"].items() if state in states)

    first: list[int] = []  # what the first ask saw: the rate counts from there

    def paced(stats: dict[str, Any], waited_s: float) -> float:
        now = reached(stats)
        if not first:
            first.append(now)
        return next_pause(expected - now, now - first[0], waited_s, pause)

    stats = _poll_stats(client, lambda st: reached(st) >= expected, timeout, paced,
                        f"waiting for {expected} tasks in {sorted(states)}")
    return dict(stats["tasks"])


def next_pause(left: int, finished: int, elapsed_s: float, floor_s: float, ceiling_s: float = 5.0) -> float:
    """Half the time the ``left`` tasks should take at the rate seen so far (``finished`` in ``elapsed_s``), within
    [floor_s, ceiling_s]: a run is asked about a few times plus once per ``floor_s`` near its end."""
    if finished <= 0 or elapsed_s <= 0:
        return floor_s
    return min(ceiling_s, max(floor_s, 0.5 * left * elapsed_s / finished))


def wait_workers(client: Client, timeout: float = 30.0) -> None:
    """Wait until every worker of every pool has reported (has a pid): the process tree is complete.  A pool
    too busy to answer ``stats`` in time (starting 100 workers on a loaded machine) is shown without them."""
    _poll_stats(client, lambda st: all("workers" in pool and all(w["pid"] for w in pool["workers"])
                                       for pool in st["pools"].values()),
                timeout, lambda _stats, _waited: 0.05, "waiting for every worker to report")


def every_task(client: Client, page: int = 1000) -> list[dict[str, Any]]:
    """Every task of the system, newest first, a page at a time (``ListTasks`` caps its ``limit``)."""
    rows: list[dict[str, Any]] = []
    while True:
        reply = client.list_page(limit=page, offset=len(rows))
        rows.extend(reply["tasks"])
        if not reply["tasks"] or len(rows) >= reply["total"]:
            return rows


# -- memory -----------------------------------------------------------------------------------------
def pss_kib(pid: int) -> int:
    """Proportional set size of one process (KiB) from /proc/<pid>/smaps_rollup; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


class MemorySampler:
    """Samples the summed PSS of every process of a system in a thread; keeps the peak."""

    def __init__(self, system: System, interval: float = 0.5) -> None:
        self.system, self.interval = system, interval
        self.peak_kib = 0
        self.peak_processes = 0
        self.samples = 0
        self.cpu_s = 0.0  # this sampler's own CPU (reading smaps_rollup walks page tables: not free)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.thread_time()
            self.sample()
            self.cpu_s += time.thread_time() - began
            self._stop.wait(self.interval)

    def sample(self) -> int:
        pids = system_pids(self.system.spec)
        total = sum(pss_kib(pid) for pid in pids)
        self.samples += 1
        self.peak_kib = max(self.peak_kib, total)
        self.peak_processes = max(self.peak_processes, len(pids))
        return total

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


# -- CPU --------------------------------------------------------------------------------------------
ROLES = ("supervisor", "task actors", "llm pool", "tool pool", "workers", "admin+logger", "client")
# Finer (CpuAccount(kinds=True)): every process kind apart (a `pegasus start` adds its launcher and watcher); "other" is
# a process with a title not listed (an MCP host).
KINDS = ("supervisor", "guardian", "task actors", "llm pool", "tool pool", "workers", "logger", "admin",
         "launcher+watcher", "other", "client")


def _machine_ticks() -> tuple[int, int]:
    """(all, idle + iowait) jiffies of the whole machine, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


class CpuAccount:
    """CPU time by process role over a run, from /proc (clock ticks).

    The roles come from the processes' titles when the account opens (``pegasus: supervisor [...]``,
    ``pegasus: llm worker 3 [...]``: actors/runtime/titles.py); the guardian, the MCP host, the admin and
    the logger count as "admin+logger".  Task actors come and go (each serves up to ``task_actor_runs``
    runs): their CPU is what the live ones used plus the growth of the supervisor's ``cutime + cstime``
    (the exited ones, reaped by it).  The client is this process (``os.times``).
    """

    def __init__(self, system: System, *, kinds: bool = False, wait: bool = True) -> None:
        if wait:  # (False: the caller has waited)
            wait_workers(system.client)
        stats = {pid: st for pid in system.pids() if (st := procs.read_stat(pid)) is not None}
        by_title = {"supervisor": "supervisor", "llm pool": "llm pool", "tool pool": "tool pool",
                    "llm worker": "workers", "tool worker": "workers"}
        if kinds:  # guardian, logger and admin apart (issue 33's split)
            by_title.update(guardian="guardian", logger="logger", admin="admin", launcher="launcher+watcher",
                            watcher="launcher+watcher")
        self.kinds = KINDS if kinds else ROLES
        rest = "other" if kinds else "admin+logger"
        titles = {pid: role_of(title_of(pid)) for pid in stats}
        supervisor = next(pid for pid, role in titles.items() if role == "supervisor")
        self.roles: dict[int, str] = {pid: by_title.get(role, rest) for pid, role in titles.items()
                                      if role != "task actor"}
        self.supervisor = supervisor
        self.start = {pid: stats[pid] for pid in self.roles}
        self.task_actors_start = self._task_actors_cpu()
        self.client_start = os.times()
        self.machine_start = _machine_ticks()
        self.wall_start = time.monotonic()

    def task_actors(self) -> dict[int, procs.ProcStat]:
        """The supervisor's live children that are not pools: its task actors, by pid."""
        return {st.pid: st for st in procs.all_stats().values()
                if st.ppid == self.supervisor and st.pid not in self.roles}

    def _task_actors_cpu(self) -> int:
        """CPU ticks of its task actors."""
        return sum(st.cpu for st in self.task_actors().values())

    def close(self, tasks: int, not_client_s: float = 0.0) -> dict[str, Any]:
        """CPU milliseconds per task by role, the total, and how busy the machine was.

        ``not_client_s``: CPU of this process that is the benchmark's, not the client's
        (the PSS sampler's thread), left out of "client".
        """
        tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        spent = dict.fromkeys(self.kinds, 0.0)
        for pid, role in self.roles.items():
            now = procs.read_stat(pid)
            if now is not None:
                spent[role] += (now.cpu - self.start[pid].cpu) * tick_ms
                if pid == self.supervisor:
                    spent["task actors"] += (now.children_cpu - self.start[pid].children_cpu) * tick_ms
        spent["task actors"] += (self._task_actors_cpu() - self.task_actors_start) * tick_ms
        client = os.times()
        spent["client"] = (client.user + client.system - self.client_start.user - self.client_start.system
                           - not_client_s) * 1000.0
        machine = _machine_ticks()
        busy = 1.0 - (machine[1] - self.machine_start[1]) / max(1, machine[0] - self.machine_start[0])
        per_task = {role: round(ms / tasks, 2) for role, ms in spent.items()}
        return {"cpu_ms_per_task": per_task, "cpu_ms_per_task_total": round(sum(spent.values()) / tasks, 2),
                "machine_busy": round(busy, 3), "wall_s": round(time.monotonic() - self.wall_start, 3)}


# -- statistics ---------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on the sorted values; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(values_s: list[float]) -> dict[str, float]:
    """p50 / p99 / mean / max of durations given in seconds, in milliseconds."""
    ms = [v * 1000.0 for v in values_s]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
            "mean_ms": round(sum(ms) / len(ms), 3) if ms else math.nan, "max_ms": round(max(ms), 3) if ms else math.nan}


def stage_hops(stages: list[dict[str, Any]]) -> list[float]:
    """Seconds between one stage's finish and the next stage's start, within each run of a task."""
    hops = []
    ordered = [s for s in stages if "started" in s and "finished" in s]
    for previous, current in zip(ordered, ordered[1:]):
        if previous.get("run") == current.get("run"):
            hops.append(current["started"] - previous["finished"])
    return hops


def cpu_count() -> int:
    return os.cpu_count() or 1


# -- results ------------------------------------------------------------------------------------------
def check(metric: str, value: float | int | None, unit: str, target: str | None = None,
          met: bool | None = None) -> dict[str, Any]:
    """One row of the results table: a figure, its unit, and the target it is held against (if any)."""
    if isinstance(value, float) and not math.isnan(value):
        value = round(value, 3)
    return {"metric": metric, "value": value, "unit": unit, "target": target, "met": met}


def iso_seconds(stamp: str) -> float:
    """time.time()-style seconds of an ISO-8601 timestamp with offset."""
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


def reflections_written(rows: Iterable[dict[str, Any] | None]) -> list[float]:
    """When (epoch s) each reflection that ran on a worker was written, from the tasks' ``post_reflection`` rows."""
    return [iso_seconds(row["updated_at"]) for row in rows
            if row is not None and row.get("status") in ("complete", "failed") and row.get("updated_at")]


def title_of(pid: int) -> str:
    """The process's title (setproctitle writes it over argv), or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def role_of(title: str) -> str:
    """``llm worker``, ``tool worker``, ``llm pool``, ``task actor``, ``supervisor``... from ``pegasus: <role> [...]``;
    ``other`` for a title that is not a Pegasus one (a child a tool started, an MCP server)."""
    if not title.startswith("pegasus: "):
        return "other"
    role = title[len("pegasus: "):].split(" [", 1)[0]
    words = role.split()
    if words and words[-1].isdigit():
        words = words[:-1]  # "llm worker 3" -> "llm worker"
    if words[:1] == ["admin"]:
        return "admin"
    return " ".join(words)


def woken_and_ran(pid: int) -> tuple[int, int]:
    """A process's wake-ups from a wait (voluntary context switches) and its nanoseconds on a CPU, all threads
    (/proc: exact, where the ticks of ``CpuAccount`` sample, and charge a short wake-up a whole 10 ms tick)."""
    woken = ran = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            status = (task / "status").read_text()
            ran += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        woken += next((int(line.split()[1]) for line in status.splitlines()
                       if line.startswith("voluntary_ctxt_switches:")), 0)
    return woken, ran
