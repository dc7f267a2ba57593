"""What a child's death means to its parent: start it again (when, after what pause) or give up and escalate.

One pure core for every parent (Erlang/OTP's child specs, Akka's ``SupervisorStrategy``).  A
``ChildSpec`` per kind of child: ``permanent``, ``transient`` or ``temporary``; a back-off from
``first_s``, then ``then_s`` doubling to ``max_s`` (over again after ``stable_s`` up); past
``intensity`` deaths in ``period_s``, ``escalate`` or, at the top of a tree, ``slow_down``.
``step(input) -> [command]`` never raises, the clock in the inputs; ``view(now)`` is what
``/healthz`` and ``stats`` show (docs/architecture.md, "Supervision").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Restart(StrEnum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


class Exceeded(StrEnum):
    ESCALATE = "escalate"
    SLOW_DOWN = "slow_down"


@dataclass(frozen=True)
class ChildSpec:
    """What the death of one kind of child means (see the module docstring)."""

    restart: Restart = Restart.PERMANENT
    intensity: int = 5
    period_s: float = 60.0
    when_exceeded: Exceeded = Exceeded.ESCALATE
    first_s: float = 0.0
    then_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 60.0

    def __post_init__(self) -> None:
        figures = (self.period_s, self.first_s, self.then_s, self.max_s, self.stable_s)
        if self.intensity < 0 or any(not 0 <= x < float("inf") for x in figures) or self.first_s > self.max_s:
            raise ValueError(f"a child spec needs finite, non-negative figures and first_s <= max_s: {self}")


TEMPORARY = ChildSpec(restart=Restart.TEMPORARY)


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Started:
    """``child`` (a name the parent gives it) of ``kind`` is up, at ``now``."""

    child: str
    kind: str
    now: float


@dataclass(frozen=True)
class Exited:
    """``child`` died at ``now`` (``normal``: it ended on its own, as asked); ``reason`` names why when known.
    Also for a start that failed (a child that never came up)."""

    child: str
    now: float
    reason: str = ""
    normal: bool = False


@dataclass(frozen=True)
class Removed:
    """The parent ended ``child`` on purpose (retired, replaced): not a death, forgotten."""

    child: str


SupervisionInput = Started | Exited | Removed


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StartAgain:
    """Start ``child`` again after ``delay_s`` (0: now); ``deaths`` is how many it has had."""

    child: str
    kind: str
    delay_s: float
    deaths: int
    reason: str


@dataclass(frozen=True)
class Dropped:
    """``child`` is not started again (temporary, or a transient one that ended normally)."""

    child: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Alarm:
    """``child`` died more than its intensity within its period: a crash loop (log it, show it)."""

    child: str
    kind: str
    deaths: int
    period_s: float
    reason: str


@dataclass(frozen=True)
class Escalate:
    """The parent gives up on ``child``: it should end itself, for its own parent to restart."""

    child: str
    kind: str
    deaths: int
    period_s: float
    reason: str


SupervisionCommand = StartAgain | Dropped | Alarm | Escalate


@dataclass
class _Child:
    kind: str
    spec: ChildSpec
    up_since: float | None = None
    count: int = 0  # deaths in all
    streak: int = 0  # deaths since it last stayed up stable_s
    recent: deque[float] = field(default_factory=deque)  # times of the deaths within period_s
    last_reason: str = ""
    last_death: float | None = None
    given_up: bool = False


class Supervision:
    """A parent's children and what their deaths mean; see the module docstring.

    ``specs`` maps a kind of child to its spec; a child of a kind not listed is
    temporary (never started again: a forgotten kind must not loop).
    """

    def __init__(self, specs: Mapping[str, ChildSpec]) -> None:
        self.specs = dict(specs)
        self.children: dict[str, _Child] = {}

    def step(self, event: SupervisionInput) -> list[SupervisionCommand]:
        try:
            if isinstance(event, Started):
                return self._started(event)
            if isinstance(event, Exited):
                return self._exited(event)
            if isinstance(event, Removed):
                self.children.pop(event.child, None)
        except Exception:  # noqa: BLE001 - a policy must never take its parent down; nothing is decided
            return []
        return []

    def _started(self, event: Started) -> list[SupervisionCommand]:
        child = self.children.get(event.child)
        spec = self.specs.get(event.kind, TEMPORARY)
        if child is None or child.kind != event.kind:
            child = self.children[event.child] = _Child(event.kind, spec)
        child.up_since = event.now
        child.given_up = False
        return []

    def _exited(self, event: Exited) -> list[SupervisionCommand]:
        child = self.children.get(event.child)
        if child is None:
            return []  # not one of ours (any more)
        spec, now = child.spec, event.now
        reason = event.reason or ("ended" if event.normal else "exited unexpectedly")
        child.count += 1
        child.last_reason, child.last_death = reason, now
        if child.up_since is not None and now - child.up_since >= spec.stable_s:
            child.streak = 0
        child.up_since = None
        child.streak += 1
        child.recent.append(now)
        self._expire(child, now)
        if spec.restart == Restart.TEMPORARY or (spec.restart == Restart.TRANSIENT and event.normal):
            del self.children[event.child]
            return [Dropped(event.child, child.kind, reason)]
        if child.given_up:
            return []  # escalated already: the parent is ending
        deaths = len(child.recent)
        if deaths > spec.intensity:
            alarm = Alarm(event.child, child.kind, deaths, spec.period_s, reason)
            if spec.when_exceeded == Exceeded.ESCALATE:
                child.given_up = True
                return [alarm, Escalate(event.child, child.kind, deaths, spec.period_s, reason)]
            return [alarm, StartAgain(event.child, child.kind, spec.max_s, child.count, reason)]
        return [StartAgain(event.child, child.kind, _pause(spec, child.streak), child.count, reason)]

    @staticmethod
    def _expire(child: _Child, now: float) -> None:
        while child.recent and child.recent[0] <= now - child.spec.period_s:
            child.recent.popleft()

    def crash_looping(self, child: str, now: float) -> bool:
        """More than its intensity of deaths within its period, as of ``now``."""
        state = self.children.get(child)
        if state is None:
            return False
        self._expire(state, now)
        return len(state.recent) > state.spec.intensity

    def view(self, now: float) -> dict[str, dict[str, Any]]:
        """Per child: its status (up, restarting, crash_looping, given_up), deaths in all and within the period,
        and what it last died of."""
        shown = {}
        for name, child in self.children.items():
            self._expire(child, now)
            looping = len(child.recent) > child.spec.intensity
            status = "given_up" if child.given_up else "crash_looping" if looping else \
                "up" if child.up_since is not None else "restarting"
            shown[name] = {
                "kind": child.kind, "status": status, "restarts": child.count, "recent": len(child.recent),
                "intensity": child.spec.intensity, "period_s": child.spec.period_s,
                "last_reason": child.last_reason or None,
                "last_death_s_ago": None if child.last_death is None else round(max(0.0, now - child.last_death), 1),
            }
        return shown


def _pause(spec: ChildSpec, streak: int) -> float:
    if streak <= 1:
        return spec.first_s
    return min(spec.max_s, spec.then_s * 2.0 ** min(streak - 2, 64))
