"""The ``pegasus`` command line; ``main`` is the console script's entry point.

    main.py    the parser (every command and flag) and main: errors become exit codes and
               one line -- or JSON -- on stderr
    base.py    exit codes, printing a result or an error, settings, a client
    views.py   the text people read (control characters of a task's text escaped)
    tasks.py   run, submit, status, list, history, suspend, resume, cancel, approve, retry
    system.py  start, stop, join, stats, backup
    local.py   machines, tools (no system needed)
    memory.py  memory list|search|show|write|forget|export|import, identity
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``actors.cli.main.main``, imported only when run (this package's modules import
    this ``__init__`` first; it stays free of them)."""
    from actors.cli.main import main as run
    return run(argv)


__all__ = ["main"]
