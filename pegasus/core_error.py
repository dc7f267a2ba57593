"""A pure core's log line as a command (``Log``, the pool's, the worker's and the newer cores' alike), and its
own bug as one: ``step`` never raises (a bug must not take its actor down), but what it swallowed is handed to
its carrier as an ERROR line with the traceback (``error_log``), not dropped in silence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pegasus.levels import Level


@dataclass(frozen=True)
class Log:
    """A log line for the carrier to write (``pegasus.logs.emit``)."""

    level: Level
    event: str
    fields: dict[str, Any] = field(default_factory=dict)


def error_log(core: str, event: object, exc: BaseException) -> Log:
    """``<core>_error``: the input's type, the error, and the exception itself (``exc_info``: structlog renders
    its traceback; ``pegasus.logs`` withholds its message as it does every content field's)."""
    return Log(Level.ERROR, f"{core}_error", {"input_type": type(event).__name__,
                                              "error": f"{type(exc).__name__}: {exc}", "exc_info": exc})
