"""The machine a run was made on: cores, memory, CPU model, Python, Thespian, date, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return float("nan")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def describe() -> dict[str, Any]:
    try:
        thespian = metadata.version("thespian")
    except metadata.PackageNotFoundError:
        thespian = "unknown"
    return {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "cpu_model": _cpu_model(),
            "python": platform.python_version(), "thespian": thespian, "platform": platform.platform(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
            "load_average_start": load_average()}


def one_line(info: dict[str, Any]) -> str:
    return (f"{info['cores']} cores, {info['memory_gib']} GiB, {info['cpu_model']}, Python {info['python']}, "
            f"Thespian {info['thespian']}, commit {info['git_commit'][:10]}{'+dirty' if info['git_dirty'] else ''}, "
            f"{info['date']}, load {info['load_average_start']}")
