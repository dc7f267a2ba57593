"""Structured logs: JSON lines in ``<state dir>/logs/pegasus.jsonl``, one per event.

Every process of a Pegasus system (supervisor, task actors, pools, workers)
configures this once, from the settings it is sent, and then logs with
``get(component, task_id=..., ...)``; the lines are bound to task_id, state and
event where those are known.  Nothing goes to the working directory or stdout.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import structlog

LOG_FILE = "pegasus.jsonl"
_configured_pid: int | None = None


def configure(state_dir: Path, level: str = "info") -> Path:
    """Send this process's structlog output to the state directory (idempotent per process)."""
    global _configured_pid
    path = Path(state_dir) / "logs" / LOG_FILE
    if _configured_pid == os.getpid():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(default=str),
        ],
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=False,
    )
    _configured_pid = os.getpid()
    return path


def configure_from(settings: dict[str, Any]) -> Path:
    """``configure`` from a settings dict (``Settings.model_dump()``, state.home resolved)."""
    home = settings.get("state", {}).get("home") or os.environ.get("PEGASUS_HOME") or "~/.pegasus"
    return configure(Path(home).expanduser(), settings.get("logging", {}).get("level", "info"))


def get(component: str, **bound: Any) -> Any:
    """A logger bound to ``component`` and any of task_id / state / event given."""
    return structlog.get_logger(component=component, pid=os.getpid(), **bound)
