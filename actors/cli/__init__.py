"""The ``pegasus`` command line; ``main`` is the console script's entry point.

``main.py`` is the parser (every command and flag) and turns errors into exit codes and one line,
or JSON, on stderr; ``base.py`` holds exit codes, printing, settings and the client; ``views.py``
the text people read (a task's control characters escaped).  Every other module is one group of
commands (``tasks.py``: run, submit, status ...; ``system.py``: start, stop, stats ...), each
module's docstring naming its own.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``actors.cli.main.main``, imported only when run (this package's modules import
    this ``__init__`` first; it stays free of them)."""
    from actors.cli.main import main as run
    return run(argv)


__all__ = ["main"]
