"""What state the store is in, when to probe it, and what to tell.  Pure: the clock is passed in.

A write that fails for want of a store moves it from writable to ``full`` (WAL truncated, a write
tried every ``PROBE_S``), ``unavailable`` (checked once, then probed with back-off), or ``damaged``
/ ``replaced`` (nothing can resume by itself: the operator restores a backup, and a damaged store's
unfinished tasks are saved beside it first).  The first failure stops the work (``HaltWork``);
each state is reported once.  The supervisor carries the commands out (actors/supervisor/store.py);
what each state means to an operator: docs/durability.md, "Storage trouble".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pegasus.core_error import Log
from pegasus.levels import Level
from pegasus.store.errors import DiskFull, StoreCorrupt, StoreReplaced, StoreUnavailable

PROBE_S = 1.0  # how often a full store is tried again (and the first retry of an unavailable one)
PROBE_MAX_S = 30.0  # the longest wait between two probes of an unavailable store

WRITABLE, FULL, UNAVAILABLE, DAMAGED, REPLACED = "writable", "full", "unavailable", "damaged", "replaced"
FINAL = frozenset({DAMAGED, REPLACED})  # states only an operator ends


@dataclass(frozen=True)
class HaltWork:
    """Stop every run and drop what memory holds ahead of the store (re-read it, when it can be)."""


@dataclass(frozen=True)
class ProbeAfter:
    """Try a write again in ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class TruncateWal:
    """Checkpoint the WAL into the database and truncate it: its space back to the disk.  ``probing``:
    tell ``wal_folded`` how it went (a probe goes on from there)."""

    probing: bool = False


@dataclass(frozen=True)
class TryWrite:
    """Make one small write; if it works, restore as at a start (``recovered``), else ``probe_failed``."""


@dataclass(frozen=True)
class CheckFile:
    """Check the database file (schema, ``quick_check``); a damaged one is reported back as ``StoreCorrupt``."""


@dataclass(frozen=True)
class SaveTasks:
    """Write the unfinished tasks as memory holds them beside the store: a damaged store may have lost them."""


Report = Log  # a line to log once, as every core's

Command = HaltWork | ProbeAfter | TruncateWal | TryWrite | CheckFile | SaveTasks | Report


# -- inputs of ``StoreHealth.step`` (the clock is each one's ``now``) ---------------------------------------
@dataclass(frozen=True)
class Failed:
    """A write or read failed for want of a store."""

    error: StoreUnavailable
    now: float


@dataclass(frozen=True)
class ProbeDue:
    """The timer ``ProbeAfter`` armed fired."""


@dataclass(frozen=True)
class WalFolded:
    """``TruncateWal(probing=True)`` worked (``error`` None) or failed."""

    error: StoreUnavailable | None
    now: float
    freed: int = 0


@dataclass(frozen=True)
class ProbeFailed:
    """``TryWrite`` found the store still refusing."""

    error: StoreUnavailable
    now: float


@dataclass(frozen=True)
class Recovered:
    """A write worked again (or the system started)."""

    now: float


Input = Failed | ProbeDue | WalFolded | ProbeFailed | Recovered


def state_of(error: StoreUnavailable | None) -> str:
    if error is None:
        return WRITABLE
    if isinstance(error, DiskFull):
        return FULL
    if isinstance(error, StoreCorrupt):
        return DAMAGED
    if isinstance(error, StoreReplaced):
        return REPLACED
    return UNAVAILABLE


class StoreHealth:
    """The store's state, as the supervisor's writes and probes find it (see the module docstring)."""

    def __init__(self) -> None:
        self.error: StoreUnavailable | None = None
        self.since: float | None = None  # when writes were first refused
        self.probes = 0  # probes failed since
        self.wal_freed = 0  # bytes the WAL gave back to a full disk, since the start

    def step(self, event: Input) -> list[Command]:
        """The commands for one input, in order (the methods below, one per input)."""
        if isinstance(event, Failed):
            return self.failed(event.error, event.now)
        if isinstance(event, ProbeDue):
            return self.probe()
        if isinstance(event, WalFolded):
            return self.wal_folded(event.error, event.now, event.freed)
        if isinstance(event, ProbeFailed):
            return self.probe_failed(event.error, event.now)
        return self.recovered(event.now)

    @property
    def state(self) -> str:
        return state_of(self.error)

    @property
    def writable(self) -> bool:
        return self.error is None

    @property
    def probing(self) -> bool:
        """Whether a probe is worth making (the store may come back by itself)."""
        return self.state in (FULL, UNAVAILABLE)

    def failed(self, error: StoreUnavailable, now: float) -> list[Command]:
        """A write or read failed for want of a store: what to do about it."""
        before = self.state
        if before in FINAL:
            return []  # only an operator ends these: a later error changes nothing
        first = self.error is None
        self.error = error
        if first:
            self.since, self.probes = now, 0
        commands: list[Command] = []
        if self.state != before:
            commands.append(Report(Level.ERROR, f"store_{self.state}", {"error": str(error), "action": self.action()}))
        if self.state == DAMAGED:
            commands.append(SaveTasks())  # before memory is dropped
        if first:
            commands.append(HaltWork())
        if self.state == FULL and before != FULL:
            commands.append(TruncateWal())
        if self.state == UNAVAILABLE and before != UNAVAILABLE:
            commands.append(CheckFile())
        if first and self.probing:
            commands.append(ProbeAfter(PROBE_S))
        return commands

    def probe(self) -> list[Command]:
        """A probe is due.  On a full disk the WAL goes first (``wal_folded``)."""
        if not self.probing:
            return []  # writable again, or only an operator can end it: no write is tried
        return [TruncateWal(probing=True)] if self.state == FULL else [TryWrite()]

    def wal_folded(self, error: StoreUnavailable | None, now: float, freed: int = 0) -> list[Command]:
        """The probe's WAL checkpoint worked (None) or failed.  Nothing is written until the WAL is folded
        into the database: a write before would take the space freed, the restored runs the rest, and the
        WAL, never checkpointed, would keep it all (nothing would resume).  Folded, its space is free."""
        self.wal_freed += freed
        if isinstance(error, DiskFull):
            return self.probe_failed(error, now)
        return [TryWrite()]

    def probe_failed(self, error: StoreUnavailable, now: float) -> list[Command]:
        """A probe found the store still refusing: the next one, while it may come back by itself."""
        self.probes += 1
        commands = self.failed(error, now)
        if self.probing:
            wait = PROBE_S if self.state == FULL else min(PROBE_MAX_S, PROBE_S * 2 ** min(self.probes, 5))
            commands.append(ProbeAfter(wait))
        return commands

    def recovered(self, now: float) -> list[Command]:
        """A write worked again (or the system started)."""
        if self.error is None:
            return []
        report = Report(Level.WARNING, "store_available", {"error_was": str(self.error),
                                                       "refused_s": round(now - (self.since or now), 3)})
        self.error, self.since, self.probes = None, None, 0
        return [report]

    def action(self) -> str | None:
        """What the operator does (None: nothing, it resumes by itself)."""
        if isinstance(self.error, (StoreCorrupt, StoreReplaced)):
            return self.error.action
        if self.state == FULL:
            return f"free space on {self.error.path.parent}; the system resumes by itself" if self.error else None
        return None

    def refusal(self) -> str:
        """What a request that would write is told meanwhile."""
        if self.state in FINAL:
            return str(self.error)
        if self.state == FULL:
            return (f"{self.error}; the system takes no new work until space is freed there "
                    f"(it tries every {PROBE_S:g} s and then resumes by itself)")
        return (f"{self.error}; the system takes no new work until the store can be written again "
                f"(it tries again, up to every {PROBE_MAX_S:g} s, and then resumes by itself)")

    def status(self, path: str) -> dict[str, Any]:
        return {"path": path, "writable": self.error is None, "state": self.state,
                "error": None if self.error is None else str(self.error), "action": self.action(),
                "wal_freed_bytes": self.wal_freed}
