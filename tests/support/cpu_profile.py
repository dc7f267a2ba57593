"""Opt-in pytest plugin: the CPU of each test's whole process tree, one JSON line a test (issue 30).

``python -m pytest -n 4 -p tests.support.cpu_profile`` writes ``$CPU_PROFILE_DIR/<worker>.jsonl`` (default
/tmp/pegasus-cpu-profile).  Each xdist worker marks its environment; every process that inherits the mark
(forked actors, subprocesses, daemons) is sampled from /proc every 0.4 s and counted from its birth, and what
a tracked parent reaped beyond the last sample is counted through the parent.  rusage alone misses actors
forked before the test and daemons nobody reaps.  A process given an environment of its own is not seen.
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


class Profile:
    def __init__(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        os.environ[MARK] = f"{uuid.uuid4().hex}-{worker}"
        self.tree, self.current, self.ticks = Tree(os.environ[MARK]), "", 0
        self.out = os.path.join(os.environ.get("CPU_PROFILE_DIR", "/tmp/pegasus-cpu-profile"), f"{worker}.jsonl")
        os.makedirs(os.path.dirname(self.out), exist_ok=True)
        self.tree.read()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        pause = threading.Event()  # not time.sleep: a test may record that (tests/actors/test_simple_system.py)
        while not pause.wait(0.4):
            ticks = self.tree.read()
            if self.current:
                self.ticks += ticks

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[Any]:
        self.tree.read()
        self.current, self.ticks, began, since = item.nodeid, 0, time.monotonic(), time.time()
        yield
        cpu = (self.ticks + self.tree.read()) / TICK
        self.current = ""
        with open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": item.nodeid, "start": round(since, 2), "wall_s": round(time.monotonic() - began, 2),
                                "cpu_s": round(cpu, 2), "load": round(os.getloadavg()[0], 1)}) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Profile(), "cpu_profile")
