"""Handler CPU per message kind, for ``benchmarks/cpusplit.py`` only (no runtime code changes).

``profiling(directory)`` wraps ``receiveMessage`` of the supervisor, task actor, pool and worker classes in
this process while it is open; a system started meanwhile (its actors are forks of this process) inherits
them.  Each actor process sums, per message type, the count and the handler's thread CPU into
``<kind>-<pid>.json`` (at most once a second, and on ``ActorExitRequest``); the rest of its /proc CPU is
outside its handlers (select, read, MAC check, unpickle).  ``cprofile``'s kinds also run under cProfile.
"""

from __future__ import annotations

import contextlib
import cProfile
import importlib
import json
import os
import pstats
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ACTORS = (("actors.supervisor", "Supervisor", "supervisor"), ("actors.task_actor", "TaskActor", "task actors"),
          ("actors.pool", "StagePool", "pools"), ("actors.worker", "StageWorker", "workers"))


class _Totals:
    """This process's counts and handler CPU by (kind, message type); a fork starts from its parent's (empty).

    With ``cprofile`` naming kinds, their handlers also run under cProfile, written as
    ``<kind>-<pid>.prof`` (pstats) beside the counts.
    """

    def __init__(self, directory: Path, cprofile: frozenset[str]) -> None:
        self.directory, self.cprofile = directory, cprofile
        self.rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.last_dump = 0.0
        self.profilers: dict[str, cProfile.Profile] = {}
        self.pid = 0  # the process the profilers belong to: a fork starts its own

    def own(self) -> None:
        """In a process forked inside a handler (an actor created), its parent's counts and running profilers are
        the parent's: stopped and dropped, neither written as this process's nor profiling its life."""
        if self.pid != os.getpid():
            for profiler in self.profilers.values():
                profiler.disable()
            self.pid, self.profilers, self.rows = os.getpid(), {}, defaultdict(lambda: [0, 0.0])

    def profiler(self, kind: str) -> cProfile.Profile | None:
        self.own()
        if kind not in self.cprofile:
            return None
        return self.profilers.setdefault(kind, cProfile.Profile(time.thread_time))  # CPU: a loaded machine preempts

    def add(self, kind: str, name: str, cpu_s: float) -> None:
        self.own()
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
        for kind, profiler in self.profilers.items():
            profiler.dump_stats(self.directory / f"{kind}-{os.getpid()}.prof")


def _wrapped(original: Any, kind: str, totals: _Totals) -> Any:
    def receiveMessage(self: Any, message: Any, sender: Any) -> Any:
        profiler = totals.profiler(kind)
        began = time.thread_time()
        try:
            if profiler is None:
                return original(self, message, sender)
            return profiler.runcall(original, self, message, sender)
        finally:
            totals.add(kind, type(message).__name__, time.thread_time() - began)

    return receiveMessage


@contextlib.contextmanager
def profiling(directory: Path, cprofile: frozenset[str] = frozenset()) -> Iterator[None]:
    totals = _Totals(directory, cprofile)
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


def top_functions(directory: Path, kind: str, count: int = 15) -> list[dict[str, Any]]:
    """The ``count`` functions with the most own time in ``kind``'s handlers, every process of it merged."""
    files = sorted(str(path) for path in directory.glob(f"{kind}-*.prof"))
    if not files:
        return []
    stats = pstats.Stats(*files)
    total = sum(row[2] for row in stats.stats.values()) or 1.0  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:count]  # type: ignore[attr-defined]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": calls, "own_s": round(own, 4),
             "own_share": round(own / total, 3), "cumulative_s": round(cumulative, 4)}
            for (file, line, name), (_, calls, own, cumulative, _) in rows]
