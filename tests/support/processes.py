"""A system's processes by their titles (actors/runtime/titles.py), read from /proc; one held stopped a while."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from actors.runtime import procs
from actors.runtime.system import SystemSpec, system_pids


def title(pid: int) -> str | None:
    """What ``ps`` shows for ``pid`` (its command line, spaces for NULs); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def titled(spec: SystemSpec, role: str, parent: str | None = None) -> list[int]:
    """The system's processes titled ``pegasus: <role>``; with ``parent``, only those whose parent is titled
    ``pegasus: <parent>`` (a worker just forked from its pool still has the pool's title)."""
    found = []
    for pid in system_pids(spec):
        if not (title(pid) or "").startswith(f"pegasus: {role}"):
            continue
        stat = procs.read_stat(pid)
        if parent is None or (stat is not None and (title(stat.ppid) or "").startswith(f"pegasus: {parent}")):
            found.append(pid)
    return found


@contextmanager
def paused(pid: int) -> Iterator[None]:
    """``pid`` stopped (SIGSTOP) for the block, and let go on (SIGCONT) whatever happens in it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
