"""Thespian's own CPU per message (issue 33): two bare actors with Pegasus's patches, a stage's messages.

``Asker`` (a task actor and pool) sends a ~2 KB ``Ask``; ``Answerer`` (a worker) answers ~800 B and ~200 B:
three messages and their acknowledgements a round, in a real multiprocTCPBase system.  ``gap_ms`` 50: the
answerer sleeps in its handler as a worker waits for its model, so every message arrives alone.  Each actor
reports its process CPU; ``PEGASUS_WIRE_PROFILE=DIR`` writes each actor's cProfile of its loop to DIR.
``python -m benchmarks.wirefloor [rounds] [gap_ms ...]``: CPU us a message, per process, min of repetitions
(docs/performance.md, "Issue 33: Thespian's floor per message (branch i33-wire2)").
"""
from __future__ import annotations

import cProfile
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors.runtime.system import SystemSpec, shutdown, start_system
from benchmarks.common import free_port, state_dir

ASK, ANSWER, DONE = "q" * 2000, "a" * 800, "d" * 200
MESSAGES_A_ROUND = 3


@dataclass(frozen=True)
class Ask:
    index: int
    gap_s: float
    body: str = ASK


@dataclass(frozen=True)
class Answer:
    index: int
    body: str = ANSWER


@dataclass(frozen=True)
class Done:
    index: int
    body: str = DONE


@dataclass(frozen=True)
class Run:
    rounds: int
    gap_s: float
    profile: str = ""  # a directory: profile the measured rounds there


@dataclass(frozen=True)
class Ran:
    asker_cpu_s: float
    answerer_cpu_s: float
    wall_s: float
    wakeups: int = 0  # voluntary context switches of both processes


@dataclass(frozen=True)
class Measure:
    """To the answerer: start (``profile`` set or not) or stop its account; it answers ``Measured``."""
    start: bool
    profile: str = ""


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wakeups: int = 0


def _switches() -> int:
    """Voluntary context switches of this process so far: how often it slept and was woken."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


class _Account:
    """A process's CPU from ``start`` to ``stop``, under cProfile when asked."""

    def __init__(self) -> None:
        self.started, self.profiler, self.switches = 0.0, None, 0

    def start(self, profile: str) -> None:
        self.profiler = cProfile.Profile(time.thread_time) if profile else None
        self.started, self.switches = time.process_time(), _switches()
        if self.profiler is not None:
            self.profiler.enable()

    def stop(self, profile: str, name: str) -> float:
        used = time.process_time() - self.started
        self.switches = _switches() - self.switches
        if self.profiler is not None:
            self.profiler.disable()
            self.profiler.dump_stats(str(Path(profile) / f"{name}-{os.getpid()}.prof"))
        return used


class Answerer(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.account = _Account()

    def receiveMsg_Ask(self, ask: Ask, sender: Any) -> None:
        if ask.gap_s:
            time.sleep(ask.gap_s)  # as a worker waits for its model: the loop does not run meanwhile
        self.send(sender, Answer(ask.index))
        self.send(sender, Done(ask.index))

    def receiveMsg_Measure(self, measure: Measure, sender: Any) -> None:
        if measure.start:
            self.account.start(measure.profile)
            self.send(sender, Measured(0.0))
        else:
            cpu_s = self.account.stop(measure.profile, "answerer")
            self.send(sender, Measured(cpu_s, self.account.switches))


class Asker(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answerer: Any = None
        self.client: Any = None
        self.run: Run | None = None
        self.done = 0
        self.account = _Account()
        self.asker_cpu_s = self.wall_s = 0.0

    def receiveMsg_Run(self, run: Run, sender: Any) -> None:
        self.client, self.run, self.done = sender, run, 0
        if self.answerer is None:
            self.answerer = self.createActor(Answerer)
        self.send(self.answerer, Measure(True, run.profile))

    def receiveMsg_Measured(self, measured: Measured, sender: Any) -> None:
        assert self.run is not None
        if self.done == 0:
            self.wall_s = time.monotonic()
            self.account.start(self.run.profile)
            self.send(self.answerer, Ask(0, self.run.gap_s))
            return
        self.send(self.client, Ran(self.asker_cpu_s, measured.cpu_s, self.wall_s,
                                   self.account.switches + measured.wakeups))

    def receiveMsg_Answer(self, answer: Answer, sender: Any) -> None:
        pass  # a task actor's transition would go here

    def receiveMsg_Done(self, done: Done, sender: Any) -> None:
        assert self.run is not None
        self.done += 1
        if self.done < self.run.rounds:
            self.send(self.answerer, Ask(self.done, self.run.gap_s))
            return
        self.asker_cpu_s = self.account.stop(self.run.profile, "asker")
        self.wall_s = time.monotonic() - self.wall_s
        self.send(self.answerer, Measure(False, self.run.profile))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        if self.answerer is not None:
            self.send(self.answerer, ActorExitRequest())


def measure(rounds: int, gaps_ms: tuple[float, ...] = (0.0, 50.0), repeats: int = 5,
            profile: str = "") -> dict[str, Any]:
    """For each gap: CPU us a round and a message of the asker, the answerer and both, min of ``repeats``
    (a warm-up of 20 rounds first; ``rounds / 5`` rounds when gapped); the wall time of the best."""
    with state_dir("pegasus-wirefloor-") as state:
        spec = SystemSpec(admin_port=free_port(), state_dir=state)
        asys = start_system(spec)
        out: dict[str, Any] = {}
        try:
            asker = asys.createActor(Asker)
            asys.ask(asker, Run(20, 0.0), 60)
            for gap in gaps_ms:
                runs, n = [], rounds if not gap else max(20, rounds // 5)
                for _ in range(repeats):
                    ran = asys.ask(asker, Run(n, gap / 1000.0, profile), 60 + n * gap / 500)
                    if not isinstance(ran, Ran):
                        raise TypeError(f"wire floor run got {ran!r}")
                    runs.append(ran)
                best = min(runs, key=lambda r: r.asker_cpu_s + r.answerer_cpu_s)
                us = 1e6 / n
                out[f"gap {gap:g} ms"] = {
                    "asker_us_a_round": round(min(r.asker_cpu_s for r in runs) * us, 1),
                    "answerer_us_a_round": round(min(r.answerer_cpu_s for r in runs) * us, 1),
                    "both_us_a_round": round((best.asker_cpu_s + best.answerer_cpu_s) * us, 1),
                    "both_us_a_message": round((best.asker_cpu_s + best.answerer_cpu_s) * us / MESSAGES_A_ROUND, 1),
                    "wall_ms_a_round": round(best.wall_s * 1e3 / n, 3),
                    "wakeups_a_round": round(min(r.wakeups for r in runs) / n, 2),
                }
            asys.tell(asker, ActorExitRequest())
            return out
        finally:
            shutdown(spec, asys, grace=10.0)


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv else 1000
    gaps = tuple(float(g) for g in argv[1:]) or (0.0, 50.0)
    print(f"load {os.getloadavg()[0]:.1f}")
    # the actors' classes named by their module, not __main__
    from benchmarks.wirefloor import measure as measure_imported
    for gap, figures in measure_imported(rounds, gaps, profile=os.environ.get("PEGASUS_WIRE_PROFILE", "")).items():
        print(gap, figures)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
