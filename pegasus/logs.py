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
from typing import Any, TextIO, cast

import structlog

from pegasus.files import open_private

LOG_FILE = "pegasus.jsonl"
_configured_pid: int | None = None


def configure(state_dir: Path, level: str = "info") -> Path:
    """Send this process's structlog output to the state directory (idempotent per process)."""
    global _configured_pid
    path = Path(state_dir) / "logs" / LOG_FILE
    if _configured_pid == os.getpid():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = LineFile(path)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(default=str),
        ],
        logger_factory=structlog.WriteLoggerFactory(file=cast(TextIO, stream)),  # it calls write and flush only
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=False,
    )
    _configured_pid = os.getpid()
    return path


class LineFile:
    """Appends each line with one ``os.write`` (whole lines, whichever process writes).

    A line that cannot be written (a full disk) is dropped and counted, never
    raised: a log call must not stop an actor (issue 15: on a full disk every
    log call raised, and the supervisor answered nothing).
    """

    def __init__(self, path: Path) -> None:
        self.fd = open_private(path)  # lives as long as the process
        self.dropped = 0

    def write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            self.dropped += 1

    def flush(self) -> None:
        pass


def configure_from(settings: dict[str, Any]) -> Path:
    """``configure`` from a settings dict (``Settings.model_dump()``, state.home resolved)."""
    home = settings.get("state", {}).get("home") or os.environ.get("PEGASUS_HOME") or "~/.pegasus"
    return configure(Path(home).expanduser(), settings.get("logging", {}).get("level", "info"))


def get(component: str, **bound: Any) -> Any:
    """A logger bound to ``component`` and any of task_id / state / event given."""
    return structlog.get_logger(component=component, pid=os.getpid(), **bound)
