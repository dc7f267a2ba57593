"""Thespian's floor for one hop: the same sends as a Pegasus hop, with no Pegasus work.

A hop is three one-way multiprocTCPBase messages -- worker -> task actor (StageResult), task actor ->
pool (StageRequest), pool -> worker (Work) -- plus the worker's WorkDone to its pool just after the
result.  Here three bare actors pass a ~1 KB dict along that path, the worker stamping ``time.time()``
as a Pegasus worker does, so ``pegasus hop - floor hop`` is what Pegasus itself adds (transition,
checkpoint, reports to the supervisor, pickling its messages).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors.runtime.system import SystemSpec, shutdown, start_system
from benchmarks.common import free_port, stage_hops, summary_ms

PAYLOAD = {"context": "x" * 1000}


@dataclass(frozen=True)
class FloorStart:
    rounds: int
    report: str = "none"  # "before" / "after": also send a report to a sink, before or after the request


@dataclass(frozen=True)
class FloorReport:
    index: int
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FloorRequest:
    index: int
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FloorWork:
    index: int
    reply_to: Any
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FloorFree:
    index: int


@dataclass(frozen=True)
class FloorDone:
    index: int
    started: float
    finished: float
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FloorStamps:
    stamps: list[tuple[float, float]]


class FloorWorker(ActorTypeDispatcher):
    def receiveMsg_FloorWork(self, work: FloorWork, sender: Any) -> None:
        started = time.time()
        self.send(work.reply_to, FloorDone(work.index, started, time.time(), work.payload))
        self.send(sender, FloorFree(work.index))


class FloorPool(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.worker: Any = None

    def receiveMsg_FloorRequest(self, request: FloorRequest, sender: Any) -> None:
        if self.worker is None:
            self.worker = self.createActor(FloorWorker)
        self.send(self.worker, FloorWork(request.index, sender, request.payload))

    def receiveMsg_FloorFree(self, free: FloorFree, sender: Any) -> None:
        pass  # a Pegasus pool marks the worker idle here

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        if self.worker is not None:
            self.send(self.worker, ActorExitRequest())


class FloorSink(ActorTypeDispatcher):
    """Stands for the supervisor: receives a report per hop and does nothing with it."""

    def receiveMsg_FloorReport(self, report: FloorReport, sender: Any) -> None:
        pass


class FloorTask(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool: Any = None
        self.client: Any = None
        self.sink: Any = None
        self.rounds = 0
        self.report = "none"
        self.stamps: list[tuple[float, float]] = []

    def receiveMsg_FloorStart(self, start: FloorStart, sender: Any) -> None:
        self.client, self.rounds, self.report, self.stamps = sender, start.rounds, start.report, []
        if self.pool is None:
            self.pool = self.createActor(FloorPool)
            self.sink = self.createActor(FloorSink)
        self.send(self.pool, FloorRequest(0, PAYLOAD))

    def receiveMsg_FloorDone(self, done: FloorDone, sender: Any) -> None:
        self.stamps.append((done.started, done.finished))
        if len(self.stamps) >= self.rounds:
            self.send(self.client, FloorStamps(self.stamps))
            return
        if self.report == "before":
            self.send(self.sink, FloorReport(done.index, PAYLOAD))
        self.send(self.pool, FloorRequest(len(self.stamps), PAYLOAD))
        if self.report == "after":
            self.send(self.sink, FloorReport(done.index, PAYLOAD))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        for child in (self.pool, self.sink):
            if child is not None:
                self.send(child, ActorExitRequest())


def measure_floor(state: Path, rounds: int) -> dict[str, Any]:
    """Hop p50/p99 of the bare path (the first 10 rounds are warm-up), three ways.

    ``none``: the sends only.  ``report_before`` / ``report_after``: the
    task actor also sends a 1 KB report to a sink actor (as a Pegasus task actor
    reports each transition to its supervisor) before / after the next request.
    """
    spec = SystemSpec(admin_port=free_port(), state_dir=state)
    asys = start_system(spec)
    out: dict[str, Any] = {}
    try:
        for report in ("none", "before", "after"):
            task = asys.createActor(FloorTask)
            reply = asys.ask(task, FloorStart(rounds + 10, report), 60)
            if not isinstance(reply, FloorStamps):
                raise RuntimeError(f"floor run got {reply!r}")
            stages = [{"run": 1, "started": s, "finished": f} for s, f in reply.stamps[10:]]
            out["hop" if report == "none" else f"hop_report_{report}"] = summary_ms(stage_hops(stages))
            asys.tell(task, ActorExitRequest())
        return out
    finally:
        shutdown(spec, asys, grace=10.0)
