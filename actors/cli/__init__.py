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

from actors.cli.main import main

__all__ = ["main"]
