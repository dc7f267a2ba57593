"""Opt-in pytest plugin: the CPU of each test's whole process tree, one JSON line a test (issue 30).

``python -m pytest -n 4 -p tests.support.cpu_profile`` writes ``$CPU_PROFILE_DIR/<worker>.jsonl`` (default
/tmp/pegasus-cpu-profile).  Where a cgroup can be made (root, cgroup v1 ``cpuacct``), each xdist worker moves
itself into one of its own: every process it starts, forked, daemonized or exec'd, stays there, and the
kernel counts their CPU, dead ones too.  Elsewhere each worker marks its environment and every process that
shows the mark (exec'd ones: a fork shows its exec'd ancestor's environment, so a forked actor system is
missed) is sampled from /proc every 0.4 s.  ``starts`` counts the actor systems a test started (fixture,
``pegasus start``, a benchmark's harness): new processes titled ``pegasus: admin`` in the cgroup, seen every
0.4 s (0 without one).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from actors.runtime import procs

MARK = "PEGASUS_CPU_PROFILE_MARK"
TICK = os.sysconf("SC_CLK_TCK")
Key = tuple[int, int]  # pid, start time


class Tree:
    """The marked processes' CPU, read in ticks since the last read."""

    def __init__(self, mark: str) -> None:
        self.mark, self.me = f"{MARK}={mark}\0".encode(), os.getpid()
        self.others: set[int] = set()
        self.last: dict[Key, tuple[int, int, int]] = {}
        self.lock = threading.Lock()

    def _ours(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return pid == self.me or self.mark in f.read()
        except OSError:
            return False

    def read(self) -> int:
        with self.lock:
            total, seen = 0, {}
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) in self.others:
                    continue
                pid = int(name)
                try:
                    st = procs.read_stat(pid)
                except (OSError, ValueError, IndexError):
                    continue
                if st is None:
                    continue
                start, own, reaped, ppid = st.starttime, st.cpu, st.children_cpu, st.ppid
                key = (pid, start)
                if key not in self.last and key not in seen:
                    if not self._ours(pid):
                        self.others.add(pid)
                        continue
                    if pid == self.me and not self.last:
                        self.last[key] = (own, reaped, ppid)
                seen[key] = (own, reaped, ppid)
                own0, reaped0, _ = self.last.get(key, (0, 0, ppid))
                total += own - own0 + reaped - reaped0
            alive = {pid for pid, _ in seen}
            total -= sum(own + reaped for key, (own, reaped, ppid) in self.last.items()
                         if key not in seen and ppid in alive)  # now inside its parent's reaped figure
            self.last = seen
            return total


CGROUPS = "/sys/fs/cgroup/cpuacct"


class Cgroup:
    """This process moved into a cpuacct cgroup of its own; what it and every descendant used, in ticks."""

    def __init__(self, name: str) -> None:
        self.path = os.path.join(CGROUPS, name)
        os.mkdir(self.path)
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        self.last = self._used()

    def _used(self) -> int:
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) * TICK // 1_000_000_000

    def read(self) -> int:
        used = self._used()
        ticks, self.last = used - self.last, used
        return ticks

    def leave(self) -> None:
        """Back to the root cgroup; this one removed unless a process outlived the run in it."""
        with open(os.path.join(CGROUPS, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        try:
            os.rmdir(self.path)
        except OSError:
            pass

    def pids(self) -> list[int]:
        with open(os.path.join(self.path, "cgroup.procs")) as f:
            return [int(line) for line in f]


class Admins:
    """New processes that take the title ``pegasus: admin`` within 4 s (a fork shows its parent's title first)."""

    def __init__(self) -> None:
        self.known: set[int] = set()
        self.untitled: dict[int, int] = {}  # pid -> reads left until its title counts as final
        self.count = 0

    def see(self, pids: list[int]) -> None:
        for pid in pids:
            if pid not in self.known:
                self.known.add(pid)
                self.untitled[pid] = 10
        for pid in list(self.untitled):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    name = f.read(64)
            except OSError:
                name = b""
            self.untitled[pid] -= 1
            admin = name.startswith(b"pegasus: admin")
            if admin or not name or not self.untitled[pid]:  # a launcher's fork shows "pegasus: launcher" first
                self.count += admin
                del self.untitled[pid]
        self.known &= set(pids) | set(self.untitled)


class Profile:
    def __init__(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        os.environ[MARK] = f"{uuid.uuid4().hex}-{worker}"
        self.current, self.ticks, self.admins, self.done = "", 0, Admins(), threading.Event()
        self.cgroup: Cgroup | None = None
        try:
            self.cgroup = Cgroup(f"pegasus-cpu-{os.environ[MARK]}")
        except OSError:
            pass
        self.tree: Cgroup | Tree = self.cgroup or Tree(os.environ[MARK])
        self.out = os.path.join(os.environ.get("CPU_PROFILE_DIR", "/tmp/pegasus-cpu-profile"), f"{worker}.jsonl")
        os.makedirs(os.path.dirname(self.out), exist_ok=True)
        self.tree.read()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()

    def _sample(self) -> None:
        while not self.done.wait(0.4):  # not time.sleep: a test may record that (tests/actors/test_simple_system.py)
            if self.cgroup is not None:  # its usage is cumulative, the dead's too: the hook's two reads are the test's
                self.admins.see(self.cgroup.pids())
                continue
            ticks = self.tree.read()
            if self.current:
                self.ticks += ticks

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[Any]:
        self.tree.read()
        self.current, self.ticks, began, since = item.nodeid, 0, time.monotonic(), time.time()
        admins = self.admins.count
        yield
        cpu = (self.ticks + self.tree.read()) / TICK
        starts = self.admins.count - admins
        self.current = ""
        with open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": item.nodeid, "start": round(since, 2), "wall_s": round(time.monotonic() - began, 2),
                                "cpu_s": round(cpu, 2), "starts": starts, "load": round(os.getloadavg()[0], 1)}) + "\n")


    def pytest_unconfigure(self) -> None:
        self.done.set()
        self.sampler.join()
        if self.cgroup is not None:
            self.cgroup.leave()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Profile(), "cpu_profile")
