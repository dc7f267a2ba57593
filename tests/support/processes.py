"""A system's processes by their titles (actors/runtime/titles.py), read from /proc."""

from __future__ import annotations

from pathlib import Path

from actors.runtime.system import SystemSpec, system_pids


def titled(spec: SystemSpec, role: str) -> list[int]:
    """The system's processes titled ``pegasus: <role>``."""
    found = []
    for pid in system_pids(spec):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if title.startswith(f"pegasus: {role}"):
            found.append(pid)
    return found
