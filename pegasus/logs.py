"""Structured logs: JSON lines in ``<state dir>/logs/pegasus.jsonl``, one per event.

Every process of a system configures this once from its settings, then logs with ``get(component,
task_id=..., ...)``; nothing goes to the working directory or stdout.  Unless ``[logging] content =
true`` no line carries task text, prompts, model or tool output: the values of ``CONTENT_KEYS`` and
exception messages become their length (``withhold_content``), and exception locals are never
rendered.  The file is private and rotated by size (pegasus.logfile).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import types
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

# structlog's package imports these when installed, for what Pegasus never uses: rich for console
# tracebacks and the reprs of locals (never rendered here), colorama for Windows colours, greenlet for
# its deprecated thread-local context.  Every process of a system held them: 85 modules, ~4.7 MiB
# (docs/memory.md).  Hidden only while structlog loads (a None entry makes an import fail; Python's
# import system documents it): a later ``import rich`` (the CLI's) loads it as ever.
_UNUSED_BY_STRUCTLOG = ("rich", "colorama", "greenlet")
# structlog imports asyncio (and through it ssl and concurrent.futures, ~2.5 MiB in every process) for
# its async log methods only, which Pegasus never calls: it gets a stand-in that imports asyncio on
# its first attribute use; everyone else imports asyncio as ever (the MCP host, the gateway).
_DEFERRED_BY_STRUCTLOG = ("asyncio",)


def emit(log: Any, level: Level, event: str, **fields: Any) -> None:
    """Write ``event`` at ``level`` (structlog's ``log`` names the line's level from the number)."""
    log.log(level, event, **fields)


class _OnFirstUse(types.ModuleType):
    """A module imported on the first use of one of its attributes (then through ``sys.modules``)."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            raise AttributeError(name)  # asked while it stands in: the import below would return it
        return getattr(importlib.import_module(self.__name__), name)


def _load_structlog() -> Any:
    modules: dict[str, Any] = sys.modules  # a None entry: typed apart
    hidden = [name for name in _UNUSED_BY_STRUCTLOG if name not in modules]
    modules.update(dict.fromkeys(hidden))
    deferred = {name: _OnFirstUse(name) for name in _DEFERRED_BY_STRUCTLOG if name not in modules}
    modules.update(deferred)
    try:
        return importlib.import_module("structlog")
    finally:
        for name in hidden:
            if modules.get(name, "loaded") is None:
                del modules[name]
        for name, stand_in in deferred.items():
            if modules.get(name) is stand_in:
                del modules[name]


structlog = _load_structlog()
from structlog.tracebacks import ExceptionDictTransformer  # noqa: E402 - after structlog's own, above

from pegasus.config import LoggingSettings, Settings
from pegasus.core_error import Log as CoreLog
from pegasus.levels import Level
from pegasus.logfile import SharedLogFile

LOG_FILE = "pegasus.jsonl"

# Fields whose values may be (or contain) what a user, a model or a tool wrote:
# error strings of stages and tools quote model and tool output, validation
# errors quote their input.
CONTENT_KEYS = frozenset({
    "answer", "args", "content", "detail", "error", "input", "message", "messages", "output", "params",
    "payload", "prompt", "question", "reply", "response", "result", "stderr", "stdout", "text",
})
# In a rendered exception (structlog's dict form): its message, notes and source of a SyntaxError.
_EXCEPTION_TEXT_KEYS = frozenset({"exc_value", "exc_notes", "syntax_error", "locals"})

_configured: tuple[Path, LoggingSettings, bool] | None = None  # what this process's log is set to


def withheld(value: Any) -> str:
    """The marker that replaces a content value: its length, not its text."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return f"<withheld: {len(text)} chars>"


def _withhold_exception(value: Any) -> Any:
    if isinstance(value, list):
        return [_withhold_exception(item) for item in value]
    if isinstance(value, dict):
        return {key: withheld(item) if key in _EXCEPTION_TEXT_KEYS and item else _withhold_exception(item)
                for key, item in value.items()}
    return value


def withhold_content(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: content fields and exception messages become ``withheld`` markers."""
    for key, value in event.items():
        if key in CONTENT_KEYS and value is not None:
            event[key] = withheld(value)
    if "exception" in event:  # rendered by ExceptionRenderer, which runs before this
        event["exception"] = _withhold_exception(event["exception"])
    return event


class _Lines:
    """The structlog logger: each rendered event is one line of the shared file.

    A line that cannot be written (a full disk) is dropped and counted, never
    raised: a log call must not stop an actor (on a full disk every log call
    raised, and the supervisor answered nothing).
    """

    def __init__(self, file: SharedLogFile) -> None:
        self.file = file
        self.dropped = 0

    def msg(self, message: str) -> None:
        try:
            self.file.write_line(message)
        except OSError:
            self.dropped += 1

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def configure(state_dir: Path, section: LoggingSettings | None = None, *, content: bool | None = None) -> Path:
    """Send this process's structlog output to the state directory (idempotent).

    ``section``: the ``[logging]`` settings (defaults when None); ``content`` overrides its ``content``.
    A process forked from one configured alike keeps what it inherited (the file opens its own
    descriptors): the launcher configures once for a system's processes (docs/memory.md).
    """
    global _configured
    path = Path(state_dir) / "logs" / LOG_FILE
    section = section or LoggingSettings()
    level = section.level
    content = section.content if content is None else content
    if _configured == (path, section, content):
        return path
    lines = _Lines(SharedLogFile(path, max_bytes=section.max_bytes, backups=section.backups))
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Never locals: a frame's variables hold the task's text whatever the policy.
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            *(() if content else (withhold_content,)),
            structlog.processors.JSONRenderer(default=str),
        ],
        logger_factory=lambda *args: lines,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=False,
    )
    _configured = (path, section, content)
    return path


def configure_from(settings: Settings) -> Path:
    """``configure`` with the settings' state directory and ``[logging]`` section."""
    return configure(settings.state_dir(), settings.logging)


def emitted(log: Any, commands: list[Any]) -> list[Any]:
    """Write the ``pegasus.core_error.Log`` lines among a core's ``commands`` to ``log``; the others, in order."""
    rest = []
    for command in commands:
        if isinstance(command, CoreLog):
            emit(log, command.level, command.event, **command.fields)
        else:
            rest.append(command)
    return rest


def get(component: str, **bound: Any) -> Any:
    """A logger bound to ``component`` and any of task_id / state / event given."""
    return structlog.get_logger(component=component, pid=os.getpid(), **bound)
