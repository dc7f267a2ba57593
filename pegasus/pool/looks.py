"""When the supervisor looks at its pools' processes for one stopped (SIGSTOP, a debugger), and which it ends.

A stopped pool answers nothing and Thespian says nothing of it: the supervisor reads its state from /proc
and ends one seen stopped on ``looks`` looks in a row, ``every_s`` apart (its death then replaces it).
A stopped pool holds up only work sent to it, so the looks are armed by work (a run placed, a request of
the supervisor's own) and go on while work is in flight or a pool was seen stopped; an idle system is not
looked at and its supervisor never wakes.  A pool stopped while idle is ended ``looks`` looks after the
first work.  ``step(input) -> [command]``, never raising; the carrier reads /proc, arms timers, ends pools.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pegasus.core_error import Log, error_log

EVERY_S = 2.5
LOOKS = 2


@dataclass(frozen=True)
class LookIn:
    """Arm the timer: the next look in ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class EndPool:
    """The pool was seen stopped on enough looks: end its process."""

    name: str


Command = LookIn | EndPool | Log


@dataclass(frozen=True)
class Work:
    """Work that a pool could hold up began (a run placed, a request of the supervisor's own)."""


@dataclass(frozen=True)
class Look:
    """The timer fired: each pool's state now (True: stopped), and whether work is in flight."""

    stopped: dict[str, bool]
    busy: bool


@dataclass(frozen=True)
class PoolStarted:
    """A pool (a new one after a death) was started: nothing seen of it yet."""

    name: str


Input = Work | Look | PoolStarted


@dataclass
class PoolLooks:
    """The looks at the pools' processes; see the module docstring."""

    every_s: float = EVERY_S
    looks: int = LOOKS
    armed: bool = False
    stopped: dict[str, int] = field(default_factory=dict)  # pool -> stopped looks in a row

    def step(self, event: Input) -> list[Command]:
        try:
            if isinstance(event, Work):
                return self._work()
            if isinstance(event, Look):
                return self._look(event.stopped, event.busy)
            if isinstance(event, PoolStarted):
                self.stopped[event.name] = 0
        except Exception as exc:  # noqa: BLE001 - a look must never take the supervisor down; nothing is decided
            return [error_log("pool_looks", event, exc)]
        return []

    def _work(self) -> list[Command]:
        """The timer, unless it is armed."""
        if self.armed:
            return []
        self.armed = True
        return [LookIn(self.every_s)]

    def _look(self, stopped: dict[str, bool], busy: bool) -> list[Command]:
        commands: list[Command] = []
        self.stopped = {name: self.stopped.get(name, 0) + 1 if now else 0 for name, now in stopped.items()}
        for name, count in self.stopped.items():
            if count >= self.looks:
                commands.append(EndPool(name))
                self.stopped[name] = 0
        self.armed = busy or any(self.stopped.values())
        if self.armed:
            commands.append(LookIn(self.every_s))
        return commands

    def seen_stopped(self, name: str) -> bool:
        return self.stopped.get(name, 0) > 0
