"""Handler CPU per message kind, for ``benchmarks/cpusplit.py`` only (no runtime code changes).

``profiling(directory)`` wraps ``receiveMessage`` of the supervisor, task actor, pool
and worker classes in this process while it is open; a system started meanwhile
(``Client.start``: its admin and actors are forks of this process) inherits the
wrapped classes.  Each actor process adds up, per message type, how many arrived and
the handler's thread CPU, and writes ``<kind>-<pid>.json`` into ``directory`` at most
once a second and on ``ActorExitRequest``.  What a process spends outside its
handlers (select, read, MAC check, unpickle, framing) is its /proc CPU minus these.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ACTORS = (("actors.supervisor", "Supervisor", "supervisor"), ("actors.task_actor", "TaskActor", "task actors"),
          ("actors.pool", "StagePool", "pools"), ("actors.worker", "StageWorker", "workers"))


class _Totals:
    """This process's counts and handler CPU by (kind, message type); a fork starts from its parent's (empty)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.last_dump = 0.0

    def add(self, kind: str, name: str, cpu_s: float) -> None:
        row = self.rows[(kind, name)]
        row[0] += 1
        row[1] += cpu_s
        if name == "ActorExitRequest" or time.monotonic() - self.last_dump >= 1.0:
            self.dump()

    def dump(self) -> None:
        self.last_dump = time.monotonic()
        by_kind: dict[str, dict[str, list[float]]] = defaultdict(dict)
        for (kind, name), row in self.rows.items():
            by_kind[kind][name] = row
        for kind, rows in by_kind.items():
            path = self.directory / f"{kind}-{os.getpid()}.json"
            path.with_suffix(".tmp").write_text(json.dumps(rows), encoding="utf-8")
            path.with_suffix(".tmp").replace(path)


def _wrapped(original: Any, kind: str, totals: _Totals) -> Any:
    def receiveMessage(self: Any, message: Any, sender: Any) -> Any:
        began = time.thread_time()
        try:
            return original(self, message, sender)
        finally:
            totals.add(kind, type(message).__name__, time.thread_time() - began)

    return receiveMessage


@contextlib.contextmanager
def profiling(directory: Path) -> Iterator[None]:
    totals = _Totals(directory)
    saved = []
    for module, name, kind in ACTORS:
        cls = getattr(importlib.import_module(module), name)
        saved.append((cls, cls.__dict__.get("receiveMessage")))
        cls.receiveMessage = _wrapped(cls.receiveMessage, kind, totals)
    try:
        yield
    finally:
        for cls, own in saved:
            if own is None:
                del cls.receiveMessage
            else:
                cls.receiveMessage = own


def read(directory: Path) -> dict[str, dict[str, list[float]]]:
    """Every process's file summed by kind: ``{kind: {message type: [count, handler CPU s]}}``."""
    rows: dict[str, dict[str, list[float]]] = {}
    for path in directory.glob("*.json"):
        kind = path.name.rsplit("-", 1)[0]
        for name, (count, cpu_s) in json.loads(path.read_text(encoding="utf-8")).items():
            row = rows.setdefault(kind, {}).setdefault(name, [0, 0.0])
            row[0] += count
            row[1] += cpu_s
    return rows
