"""Finding a system's processes reads /proc cheaply (issue 30: every start and stop scans every process of the
host several times): a holder of the state directory's lock is found by its descriptor's name first, and a
process's stat is read as it is, even with parentheses and spaces in its name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import ownership, procs

HOLDER = """
import ctypes, sys
from pathlib import Path
from actors.runtime import ownership
ctypes.CDLL(None).prctl(15, b"a) b (c", 0, 0, 0)  # PR_SET_NAME: a name /proc/<pid>/stat puts in parentheses
lock = ownership.acquire(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path: Path):
    """A process holding tmp_path's lock, named ``a) b (c``; ended after the test."""
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield child
    finally:
        child.kill()
        child.wait(timeout=60)


def test_the_holder_is_found_without_a_stat_of_every_descriptor_of_every_process(
        holder: subprocess.Popen[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stats: list[str] = []
    named: list[str | None] = []  # what each descriptor looked at named as it was looked at (one gone: None)
    real_stat = os.stat

    def counted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).startswith("/proc/"):
            stats.append(str(path))
            try:  # now: read after the search, a number closed since may name another process's new file
                named.append(os.path.basename(os.readlink(path)))
            except OSError:
                named.append(None)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(ownership.os, "stat", counted)
    with open(ownership.lock_path(tmp_path), "rb"):  # this process has it open too: a reader, not a holder
        assert ownership.holders(tmp_path) == [holder.pid]
    assert set(named) <= {ownership.LOCK_FILE, None}  # other systems' locks, on a shared host: never a socket, a pipe...
    assert any(path.startswith(f"/proc/{holder.pid}/fd/") for path in stats)


def test_a_stat_is_read_whatever_the_process_is_named(holder: subprocess.Popen[str]) -> None:
    stat = procs.read_stat(holder.pid)
    assert stat is not None and stat.ppid == os.getpid() and stat.starttime > 0 and stat.state in "RSD"
    again = procs.all_stats()[holder.pid]
    assert (again.pid, again.ppid, again.starttime) == (stat.pid, stat.ppid, stat.starttime)
    assert procs.is_alive(holder.pid, stat.starttime) and not procs.is_alive(holder.pid, stat.starttime + 1)
    assert procs.read_stat(2**22 + 1) is None  # above pid_max: no such process


def test_a_lock_nobody_holds_has_no_holders_without_a_look_at_any_process(
        holder: subprocess.Popen[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ownership.holders(tmp_path) == [holder.pid]
    holder.kill()
    holder.wait(timeout=60)
    looked: list[str] = []
    real_scandir = os.scandir

    def counted(path: Any = ".") -> Any:
        looked.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(ownership.os, "scandir", counted)
    assert ownership.holders(tmp_path) == [] and ownership.pids_of(tmp_path) == []
    assert "/proc" not in looked
